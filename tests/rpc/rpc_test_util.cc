#include "tests/rpc/rpc_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "service/engine/prompt.h"
#include "service/model/language_model.h"

namespace attnscope::testing {
namespace {

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3));
}

}  // namespace

std::unique_ptr<v1::Analyzer::Stub> NewStub(const std::string& address) {
  return v1::Analyzer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

AnalyzeResult RunAnalyze(v1::Analyzer::Stub& stub, const v1::AnalyzeRequest& request,
                         double deadline_seconds) {
  grpc::ClientContext context;
  context.set_deadline(In(deadline_seconds));
  AnalyzeResult result;
  auto reader = stub.Analyze(&context, request);
  v1::AnalyzeEvent event;
  while (reader->Read(&event)) result.events.push_back(event);
  result.status = reader->Finish();
  return result;
}

GenerateResult RunGenerate(v1::Analyzer::Stub& stub, const v1::GenerateRequest& request,
                           double deadline_seconds) {
  grpc::ClientContext context;
  context.set_deadline(In(deadline_seconds));
  GenerateResult result;
  auto reader = stub.Generate(&context, request);
  v1::GenerateEvent event;
  while (reader->Read(&event)) result.events.push_back(event);
  result.status = reader->Finish();
  return result;
}

v1::GenerateRequest LongGeneration(const std::string& text, int max_new_tokens) {
  v1::GenerateRequest request;
  request.set_text(text);
  request.set_max_new_tokens(max_new_tokens);
  request.set_stop_at_eos(false);
  request.set_num_alternatives(20);
  request.set_layer_sink_scores(true);
  return request;
}

std::unique_ptr<v1::Analyzer::Stub> SmallWindowStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  return v1::Analyzer::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

LongGenerationCall::LongGenerationCall(const std::string& address, const std::string& text,
                                       double deadline_seconds)
    : stub(SmallWindowStub(address)) {
  context.set_deadline(In(deadline_seconds));
  reader = stub->Generate(&context, LongGeneration(text));
  [&] {
    ASSERT_TRUE(reader->Read(&event));
    ASSERT_TRUE(event.has_prompt());
  }();
}

v1::AnalyzeRequest TextRequest(const std::string& text) {
  v1::AnalyzeRequest request;
  request.set_text(text);
  return request;
}

v1::AnalyzeRequest IdsRequest(const std::vector<int64_t>& ids) {
  v1::AnalyzeRequest request;
  request.mutable_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  return request;
}

std::string BundledModelDir() { return std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"; }

std::string FixtureModelDir() {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/gpt2-random-hub-layout";
}

const engine::ModelBundle& BundledModel() {
  static const engine::ModelBundle* bundle = [] {
    model::SetComputeThreads(0);
    auto loaded = engine::LoadModelBundle(BundledModelDir());
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      std::abort();
    }
    return loaded->release();
  }();
  return *bundle;
}

std::vector<int64_t> SampleIds(size_t n) {
  std::ifstream in(std::string(ATTNSCOPE_TEST_DATA_DIR) + "/english-sample.txt");
  std::ostringstream text;
  text << in.rdbuf();
  // Enough characters for n tokens of English prose, with room to spare.
  auto prompt = engine::PromptFromText(BundledModel(), text.str().substr(0, n * 8 + 64));
  EXPECT_TRUE(prompt.ok()) << prompt.status();
  std::vector<int64_t> ids = prompt.ok() ? prompt->ids : std::vector<int64_t>{};
  EXPECT_GE(ids.size(), n);
  ids.resize(std::min(ids.size(), n));
  return ids;
}

std::string ScrapeMetrics(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) return "";
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

double MetricValue(const std::string& scrape, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = scrape.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + key.size()));
}

std::vector<v1::AnalyzeEvent> WithoutTimings(std::vector<v1::AnalyzeEvent> events) {
  for (v1::AnalyzeEvent& e : events) {
    if (e.has_summary()) e.mutable_summary()->clear_timings();
  }
  return events;
}

void RpcTest::StartServer(const std::vector<std::string>& args) {
  std::string error;
  server_ = ServerProcess::Start(args, &error);
  ASSERT_NE(server_, nullptr) << error;
  stub_ = NewStub(server_->address());
}

double WaitForMetric(const std::string& metrics_address, const std::string& series, double value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  double now = MetricValue(ScrapeMetrics(metrics_address), series);
  while (now != value && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, bounded
    now = MetricValue(ScrapeMetrics(metrics_address), series);
  }
  return now;
}

bool RpcTest::StillServes() {
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  if (!stub_->ListModels(&context, v1::ListModelsRequest(), &models).ok()) return false;
  const AnalyzeResult result = RunAnalyze(*stub_, TextRequest("Still here?"));
  return result.status.ok() && !result.events.empty() && result.events.back().has_summary() &&
         models.models_size() >= 1;
}

}  // namespace attnscope::testing
