// Shared by the rpc integration tests: a fixture that starts the real server
// and the bundled model loaded in-process for reference results.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/engine/model_bundle.h"
#include "tests/rpc/server_process.h"

namespace attnscope::testing {

namespace v1 = ::attnscope::v1;

struct AnalyzeResult {
  grpc::Status status;
  std::vector<v1::AnalyzeEvent> events;
};

struct GenerateResult {
  grpc::Status status;
  std::vector<v1::GenerateEvent> events;
};

// A stub on a fresh channel to `address`.
std::unique_ptr<v1::Analyzer::Stub> NewStub(const std::string& address);

// Runs a whole Analyze / Generate call (deadline in seconds from now).
AnalyzeResult RunAnalyze(v1::Analyzer::Stub& stub, const v1::AnalyzeRequest& request,
                         double deadline_seconds = 120);
GenerateResult RunGenerate(v1::Analyzer::Stub& stub, const v1::GenerateRequest& request,
                           double deadline_seconds = 120);

// A long generation (stop_at_eos off): its stream outlasts the test's
// actions, with alternatives and sink scores making each event large.
v1::GenerateRequest LongGeneration(const std::string& text, int max_new_tokens = 400);

// A stub on a channel whose receive window stays at 1 KiB (no BDP growth): a
// server writing to a client that does not read blocks after a few events,
// and one writing to a slow reader goes at the reader's pace.
std::unique_ptr<v1::Analyzer::Stub> SmallWindowStub(const std::string& address);

// A LongGeneration(text) stream on a SmallWindowStub of `address`, its
// deadline `deadline_seconds` from now; the constructor ASSERTs that the
// first event (the prompt) arrived.
struct LongGenerationCall {
  LongGenerationCall(const std::string& address, const std::string& text,
                     double deadline_seconds = 300);
  std::unique_ptr<v1::Analyzer::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader;
  v1::GenerateEvent event;
};

v1::AnalyzeRequest TextRequest(const std::string& text);
v1::AnalyzeRequest IdsRequest(const std::vector<int64_t>& ids);

// The bundled model (models/tiny-gpt2), loaded once per process, computing
// with as many threads as the server (all cores): GEMMs sum in an order that
// depends on the thread count, and the comparisons are exact.
const engine::ModelBundle& BundledModel();
std::string BundledModelDir();
// A fixture model without a tokenizer (tests/data/models/...).
std::string FixtureModelDir();
// The first `n` token ids of tests/data/english-sample.txt under the bundled
// model's tokenizer.
std::vector<int64_t> SampleIds(size_t n);

// GET http://`address`/metrics (address "host:port"); "" on failure.
std::string ScrapeMetrics(const std::string& address);
// The value of the sample line `series` (e.g. 'attnscope_queued_requests' or
// 'attnscope_requests_total{code="OK",rpc="Analyze"}'), or -1 if absent.
double MetricValue(const std::string& scrape, const std::string& series);

// Polls `metrics_address` until `series` (as MetricValue) equals `value`,
// for at most 60 s; returns the last value seen.
double WaitForMetric(const std::string& metrics_address, const std::string& series, double value);

// Events of a result without their timings (which differ run to run).
std::vector<v1::AnalyzeEvent> WithoutTimings(std::vector<v1::AnalyzeEvent> events);

class RpcTest : public ::testing::Test {
 protected:
  // Starts attnscope-server with `args` (ASSERTs that it came up) and makes
  // stub_ for it.
  void StartServer(const std::vector<std::string>& args = {});
  // True if the server answers ListModels and a short Analyze correctly.
  bool StillServes();

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::Analyzer::Stub> stub_;
};

}  // namespace attnscope::testing
