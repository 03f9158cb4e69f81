// LayerStreamer, the proto conversions and request validation, on a fixture
// model in process (no server).
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/analysis/stats_json.h"
#include "service/core/dtype.h"
#include "service/engine/analysis_run.h"
#include "service/rpc/layer_streamer.h"
#include "service/rpc/proto_convert.h"
#include "service/rpc/request_validation.h"
#include "service/rpc/status_codes.h"

namespace attnscope::rpc {
namespace {

using ::testing::HasSubstr;

const engine::ModelBundle& Fixture() {  // 3 layers, 4 heads, 64 positions, no tokenizer
  static const engine::ModelBundle* bundle =
      engine::LoadModelBundle(std::string(ATTNSCOPE_TEST_DATA_DIR) +
                              "/models/gpt2-random-hub-layout")
          ->release();
  return *bundle;
}

engine::Prompt FixturePrompt(int64_t t) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < t; ++i) ids.push_back((i * 37 + 11) % 1000);
  return *engine::PromptFromIds(Fixture(), ids);
}

// Logs the order of attention blocks and emitted layer events.
class BlockLog : public model::ForwardObserver {
 public:
  explicit BlockLog(std::vector<std::string>* log) : log_(log) {}
  model::ObserverNeeds Needs() const override { return {true, false, false, false}; }
  void OnAttention(const model::AttentionBlock& b) override {
    log_->push_back("block " + std::to_string(b.layer));
  }

 private:
  std::vector<std::string>* log_;
};

struct Streamed {
  std::vector<v1::AnalyzeEvent> events;
  std::vector<std::string> log;
  engine::AnalysisRun run;
};

Streamed Stream(const engine::Prompt& prompt, StreamOptions options, int64_t block_size = 0,
                bool record = false) {
  Streamed s;
  LayerStreamer streamer(3, 4, std::move(options), [&](const v1::AnalyzeEvent& e) {
    s.events.push_back(e);
    if (e.has_layer()) s.log.push_back("emit " + std::to_string(e.layer().layer()));
    return true;
  });
  BlockLog logger(&s.log);
  engine::AnalysisSettings settings;
  settings.query_block_size = block_size;
  settings.record_tensors = record;
  streamer.AttachTo(settings);
  settings.extra_observers.push_back(&logger);
  auto run = engine::RunAnalysis(Fixture(), prompt, settings);
  EXPECT_TRUE(run.ok()) << run.status();
  s.run = std::move(run).value();
  return s;
}

TEST(LayerStreamerTest, EmitsEachLayerBeforeTheNextLayerStarts) {
  const Streamed s = Stream(FixturePrompt(20), {}, 6);
  // 4 blocks of query rows per layer; each layer's event comes after its
  // blocks and before any block of the next layer.
  std::vector<std::string> expected;
  for (int l = 0; l < 3; ++l) {
    for (int b = 0; b < 4; ++b) expected.push_back("block " + std::to_string(l));
    expected.push_back("emit " + std::to_string(l));
  }
  EXPECT_EQ(s.log, expected);
}

TEST(LayerStreamerTest, LayerNumbersAndSummaryRebuildTheExactStats) {
  const engine::Prompt prompt = FixturePrompt(25);
  const Streamed s = Stream(prompt, {});
  std::vector<v1::LayerStats> layers;
  for (const v1::AnalyzeEvent& e : s.events) layers.push_back(e.layer());
  ASSERT_EQ(layers.size(), 3u);
  const analysis::PromptStats& stats = s.run.stats;
  EXPECT_EQ(std::vector<double>(layers[1].sink_score().begin(), layers[1].sink_score().end()),
            stats.sink_score[1]);
  const v1::Summary summary = SummaryToProto(stats, s.run.structure, prompt);
  auto rebuilt = StatsFromProto(layers, summary);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(analysis::StatsToJson(*rebuilt).dump(), analysis::StatsToJson(stats).dump());
  EXPECT_EQ(rebuilt->num_tokens, 25);
  EXPECT_EQ(rebuilt->num_layers, 3);
  EXPECT_EQ(rebuilt->num_heads, 4);
}

TEST(LayerStreamerTest, AttentionChunksReassembleIntoTheRecordedTensors) {
  const int64_t t = 30;
  for (v1::TensorDtype dtype : {v1::TENSOR_DTYPE_FLOAT32, v1::TENSOR_DTYPE_FLOAT16}) {
    StreamOptions options;
    options.tensors.attention.layers = {0, 2};
    options.tensors.attention.heads = {1, 3};
    options.tensors.attention_float16 = dtype == v1::TENSOR_DTYPE_FLOAT16;
    options.chunk_bytes = 1000;  // not a multiple of a row
    const Streamed s = Stream(FixturePrompt(t), options, 7, true);
    const std::vector<float>& all = s.run.tensors->attentions();  // (3, 4, T, T)
    std::map<std::pair<int, int>, std::string> data;
    for (const v1::AnalyzeEvent& e : s.events) {
      if (!e.has_attention()) continue;
      const v1::TensorChunk& c = e.attention();
      std::string& tensor = data[{c.layer(), c.head()}];
      EXPECT_EQ(c.offset(), static_cast<int64_t>(tensor.size()));
      EXPECT_LE(c.data().size(), 1000u);
      tensor += c.data();
    }
    ASSERT_EQ(data.size(), 4u);
    for (const auto& [key, tensor] : data) {
      const float* want = all.data() + (key.first * 4 + key.second) * t * t;
      if (dtype == v1::TENSOR_DTYPE_FLOAT32) {
        ASSERT_EQ(tensor.size(), static_cast<size_t>(t * t * 4));
        EXPECT_EQ(std::memcmp(tensor.data(), want, tensor.size()), 0);
      } else {
        ASSERT_EQ(tensor.size(), static_cast<size_t>(t * t * 2));
        for (int64_t i = 0; i < t * t; ++i) {
          uint16_t half = 0;
          std::memcpy(&half, tensor.data() + 2 * i, 2);
          ASSERT_EQ(half, FloatToHalf(want[i])) << "element " << i;
        }
      }
    }
  }
}

TEST(LayerStreamerTest, AFailedSendStopsTheForwardPassAtTheNextLayer) {
  LayerStreamer streamer(3, 4, {}, [](const v1::AnalyzeEvent&) { return false; });
  engine::AnalysisSettings settings;
  streamer.AttachTo(settings);
  settings.should_stop = [&] { return streamer.failed(); };
  auto run = engine::RunAnalysis(Fixture(), FixturePrompt(10), settings);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(run.status().message(), HasSubstr("before layer 1"));
  EXPECT_EQ(streamer.layers_emitted(), 1);
}

TEST(ProtoConvertTest, StatsFromProtoRejectsInconsistentStreams) {
  const engine::Prompt prompt = FixturePrompt(8);
  const Streamed s = Stream(prompt, {});
  std::vector<v1::LayerStats> layers;
  for (const v1::AnalyzeEvent& e : s.events) layers.push_back(e.layer());
  v1::Summary summary = SummaryToProto(s.run.stats, s.run.structure, prompt);
  layers[2].add_sink_score(0.5);
  auto broken = StatsFromProto(layers, summary);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(broken.status().message(), HasSubstr("layer 2 sink_score has 5 values, expected 4"));
  layers.pop_back();
  summary.add_z(1.0);
  EXPECT_THAT(StatsFromProto(layers, summary).status().message(), HasSubstr("summary z"));
  EXPECT_FALSE(StatsFromProto({}, summary).ok());
}

TEST(ProtoConvertTest, GeneratedTokensAndModelsRoundTrip) {
  engine::GeneratedToken t;
  t.index = 3;
  t.position = 17;
  t.id = 464;
  t.text = " The";
  t.probability = 0.25;
  t.entropy_nats = 2.5;
  t.entropy_normalized = 0.23;
  t.alternatives = {{464, " The", 0.25}, {317, " A", 0.125}};
  t.sink_scores = {0.5, 0.75};
  const engine::GeneratedToken back = GeneratedTokenFromProto(GeneratedTokenToProto(t));
  EXPECT_EQ(back.index, 3);
  EXPECT_EQ(back.position, 17);
  EXPECT_EQ(back.text, " The");
  EXPECT_EQ(back.alternatives[1].text, " A");
  EXPECT_EQ(back.alternatives[1].probability, 0.125);
  EXPECT_EQ(back.sink_scores, t.sink_scores);
  const ModelDescription m = ModelFromProto(
      ModelToProto(DescribeModel("fx", Fixture().config(), Fixture().tokenizer != nullptr)));
  EXPECT_EQ(m.name, "fx");
  EXPECT_EQ(m.num_layers, 3);
  EXPECT_EQ(m.max_positions, 64);
  EXPECT_EQ(m.dtype, "float32");
  EXPECT_FALSE(m.has_tokenizer);
}

AnalyzeLimits Limits() {
  AnalyzeLimits limits;
  limits.chunk_bytes = 4096;
  return limits;
}

// The plan holds the precision (the server's default when the request names
// none) and checks the tokenized prompt against the attention limit.
TEST(RequestValidationTest, PlansPrecisionAndThePromptsLimit) {
  v1::AnalyzeOptions options;
  AnalyzeLimits limits = Limits();
  limits.default_precision = model::Precision::kBfloat16;
  limits.max_attention_bytes = 4 * 3 * 4 * 10 * 10;  // all 3 layers x 4 heads at T = 10
  auto plan = PlanAnalysis(options, Fixture(), "fx", limits);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->settings.precision, model::Precision::kBfloat16);
  EXPECT_TRUE(plan->CheckPromptLength(1000).ok()) << "no attention asked";
  options.set_precision("float32");
  options.set_return_attention(true);
  plan = PlanAnalysis(options, Fixture(), "fx", limits);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->settings.precision, model::Precision::kFloat32);
  EXPECT_TRUE(plan->CheckPromptLength(10).ok());
  EXPECT_THAT(plan->CheckPromptLength(11).message(), HasSubstr("--max-attention-bytes"));
  options.set_precision("fp8");
  EXPECT_THAT(PlanAnalysis(options, Fixture(), "fx", limits).status().message(),
              HasSubstr("options.precision"));
}

TEST(RequestValidationTest, PlansAttentionSelections) {
  v1::AnalyzeOptions options;
  options.set_return_attention(true);
  options.add_attention_layers(2);
  options.add_attention_layers(0);
  options.add_attention_layers(2);  // in model order, each once
  options.set_attention_dtype(v1::TENSOR_DTYPE_FLOAT16);
  auto plan = PlanAnalysis(options, Fixture(), "fx", Limits());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stream.tensors.attention.layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(plan->stream.tensors.attention.heads, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(plan->stream.tensors.attention_float16);
  EXPECT_EQ(plan->stream.chunk_bytes, 4096);
  options.add_attention_heads(4);
  EXPECT_THAT(PlanAnalysis(options, Fixture(), "fx", Limits()).status().message(),
              HasSubstr("options.attention_heads[0]: head 4 is outside [0, 4) of model 'fx'"));
  // Without return_attention nothing is streamed (but indices still checked).
  v1::AnalyzeOptions none;
  none.add_attention_layers(1);
  EXPECT_TRUE(PlanAnalysis(none, Fixture(), "fx", Limits())->stream.tensors.attention.layers.empty());
}

TEST(RequestValidationTest, ResolvesPromptsWithinTheLimits) {
  v1::AnalyzeRequest request;
  request.mutable_ids()->add_ids(5);
  request.mutable_ids()->add_ids(999);
  auto prompt = ResolvePrompt(PromptOf(request), Fixture(), "fx", 0);
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(prompt->ids, (std::vector<int64_t>{5, 999}));
  EXPECT_THAT(ResolvePrompt(PromptOf(request), Fixture(), "fx", 1).status().message(),
              HasSubstr("prompt: 2 tokens is over the server's limit of 1 tokens"));
  request.mutable_ids()->add_ids(1000);
  EXPECT_THAT(ResolvePrompt(PromptOf(request), Fixture(), "fx", 0).status().message(),
              HasSubstr("ids: token id 1000 at position 2 is outside the vocabulary [0, 1000)"));
  request.set_text("hello");
  EXPECT_THAT(ResolvePrompt(PromptOf(request), Fixture(), "fx", 0).status().message(),
              HasSubstr("model 'fx' has no tokenizer"));
}

TEST(StatusCodesTest, MapsEveryKindOfErrorToItsGrpcCode) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("x")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(ToGrpcStatus(absl::CancelledError("x")).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::INTERNAL);
  EXPECT_EQ(ToGrpcStatus(absl::DataLossError("boom")).error_message(), "boom");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no such model")).message(),
            "NOT_FOUND: no such model");
}

}  // namespace
}  // namespace attnscope::rpc
