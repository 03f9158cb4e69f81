// Analyze, ListModels, health and reflection against the real server,
// compared with the same analysis run in this process.
#include <cstring>

#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "service/core/dtype.h"
#include "service/engine/analysis_run.h"
#include "service/engine/prompt.h"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

using ::testing::ElementsAre;

template <typename T>
std::vector<T> Vec(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

engine::AnalysisRun LocalRun(const engine::Prompt& prompt, bool record = false) {
  engine::AnalysisSettings settings;
  settings.record_tensors = record;
  auto run = engine::RunAnalysis(BundledModel(), prompt, settings);
  EXPECT_TRUE(run.ok()) << run.status();
  return std::move(run).value();
}

TEST_F(RpcTest, ListModelsDescribesEveryLoadedModel) {
  StartServer({"--model", "tiny-gpt2=" + BundledModelDir(), "--model",
               "fixture=" + FixtureModelDir()});
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(stub_->ListModels(&context, v1::ListModelsRequest(), &response).ok());
  ASSERT_EQ(response.models_size(), 2);
  const v1::ModelInfo& tiny = response.models(0);
  EXPECT_EQ(tiny.name(), "tiny-gpt2");
  EXPECT_EQ(tiny.architecture(), "gpt2");
  EXPECT_EQ(tiny.num_layers(), 6);
  EXPECT_EQ(tiny.num_heads(), 6);
  EXPECT_EQ(tiny.num_kv_heads(), 6);
  EXPECT_EQ(tiny.hidden_size(), 192);
  EXPECT_EQ(tiny.vocab_size(), 50257);
  EXPECT_EQ(tiny.max_positions(), 512);
  EXPECT_EQ(tiny.dtype(), "float16");
  EXPECT_TRUE(tiny.has_tokenizer());
  const v1::ModelInfo& fixture = response.models(1);
  EXPECT_EQ(fixture.name(), "fixture");
  EXPECT_EQ(fixture.num_layers(), 3);
  EXPECT_EQ(fixture.num_heads(), 4);
  EXPECT_EQ(fixture.max_positions(), 64);
  EXPECT_FALSE(fixture.has_tokenizer());
}

TEST_F(RpcTest, AnalyzeStreamsTokensLayersAndSummaryWithTheLocalNumbers) {
  StartServer();
  const std::string text = "Paris is the capital of France. Paris is the capital of";
  const AnalyzeResult r = RunAnalyze(*stub_, TextRequest(text));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  auto prompt = engine::PromptFromText(BundledModel(), text);
  ASSERT_TRUE(prompt.ok());
  const engine::AnalysisRun run = LocalRun(*prompt);
  const analysis::PromptStats& s = run.stats;
  ASSERT_EQ(r.events.size(), 1u + 6u + 1u);

  const v1::Tokens& tokens = r.events[0].tokens();
  EXPECT_EQ(Vec(tokens.ids()), prompt->ids);
  ASSERT_EQ(tokens.tokens_size(), static_cast<int>(prompt->ids.size()));
  for (int i = 0; i < tokens.tokens_size(); ++i) {
    EXPECT_EQ(tokens.tokens(i), prompt->tokens[i]);
    EXPECT_EQ(tokens.texts(i), prompt->Display(i));
    EXPECT_EQ(tokens.offsets(i).begin(), prompt->offsets[i].first);
    EXPECT_EQ(tokens.offsets(i).end(), prompt->offsets[i].second);
  }
  for (size_t l = 0; l < 6; ++l) {
    ASSERT_TRUE(r.events[1 + l].has_layer()) << "event " << 1 + l;
    const v1::LayerStats& layer = r.events[1 + l].layer();
    EXPECT_EQ(layer.layer(), static_cast<int>(l));
    EXPECT_EQ(Vec(layer.sink_score()), s.sink_score[l]);
    EXPECT_EQ(Vec(layer.first_token_mass()), s.first_token_mass[l]);
    EXPECT_EQ(Vec(layer.attention_entropy()), s.attention_entropy[l]);
    EXPECT_EQ(Vec(layer.prev_token_score()), s.prev_token_score[l]);
    EXPECT_EQ(Vec(layer.hidden_state_norms()), s.token_norms[l + 1]);
    EXPECT_EQ(Vec(layer.value_weighted_first_token_share()), s.value_weighted_normalized[l]);
    EXPECT_EQ(Vec(layer.value_weighted_first_token_share_raw()), s.value_weighted_raw[l]);
  }
  const v1::Summary& sum = r.events.back().summary();
  EXPECT_EQ(sum.health(), s.health);
  EXPECT_EQ(Vec(sum.received()), s.received);
  EXPECT_EQ(Vec(sum.z()), s.z);
  EXPECT_EQ(Vec(sum.max_norm()), s.max_norm);
  EXPECT_EQ(Vec(sum.embedding_norms()), s.token_norms[0]);
  EXPECT_EQ(Vec(sum.structural()), s.structural);
  EXPECT_EQ(Vec(sum.next_token_entropy_nats()), s.next_token_entropy_nats);
  EXPECT_EQ(Vec(sum.next_token_entropy_normalized()), s.next_token_entropy_normalized);
  EXPECT_EQ(sum.massive_ratio(), s.massive_ratio);
  EXPECT_EQ(sum.massive_argmax(), s.massive_argmax);
  EXPECT_EQ(sum.back_half_sink_share(), s.back_half_sink_share);
  EXPECT_EQ(sum.num_candidates(), s.num_candidates);
  EXPECT_EQ(sum.threshold(), 6.0);
  EXPECT_EQ(sum.template_(), "none");
  ASSERT_EQ(sum.sinks_size(), static_cast<int>(s.sinks.size()));
  for (int i = 0; i < sum.sinks_size(); ++i) {
    EXPECT_EQ(sum.sinks(i).position(), s.sinks[i]);
    EXPECT_EQ(sum.sinks(i).z(), s.z[s.sinks[i]]);
  }
  const v1::Timings& t = sum.timings();
  EXPECT_GT(t.compute_seconds(), 0);
  EXPECT_GE(t.total_seconds(), t.compute_seconds());
  EXPECT_GT(t.first_event_seconds(), 0);
  EXPECT_LE(t.first_event_seconds(), t.total_seconds());
}

TEST_F(RpcTest, AnalyzeOptionsChangeTheResultsLikeLocalSettings) {
  StartServer();
  const std::vector<int64_t> ids = SampleIds(48);
  v1::AnalyzeRequest request = IdsRequest(ids);
  request.mutable_options()->set_threshold(1.5);
  request.mutable_options()->set_query_block_size(7);
  request.mutable_options()->set_hidden_state_norms(false);
  const AnalyzeResult r = RunAnalyze(*stub_, request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  auto prompt = engine::PromptFromIds(BundledModel(), ids);
  engine::AnalysisSettings settings;
  settings.threshold = 1.5;
  settings.query_block_size = 7;
  auto run = engine::RunAnalysis(BundledModel(), *prompt, settings);
  ASSERT_TRUE(run.ok());
  const v1::Summary& sum = r.events.back().summary();
  EXPECT_EQ(sum.threshold(), 1.5);
  std::vector<int64_t> sinks;
  for (const v1::Sink& sink : sum.sinks()) sinks.push_back(sink.position());
  EXPECT_EQ(sinks, run->stats.sinks);
  EXPECT_EQ(sum.health(), run->stats.health);
  EXPECT_EQ(r.events[1].layer().hidden_state_norms_size(), 0);
  EXPECT_EQ(Vec(r.events[3].layer().attention_entropy()), run->stats.attention_entropy[2]);
  EXPECT_EQ(Vec(sum.z()), run->stats.z);
}

// Attention chunks of `layer`/`head` in stream order, checking that each
// follows its layer's LayerStats event.
std::string CollectTensor(const std::vector<v1::AnalyzeEvent>& events, int layer, int head,
                          v1::TensorDtype dtype, int64_t t, int* chunks) {
  std::string data;
  int current_layer = -1;
  *chunks = 0;
  for (const v1::AnalyzeEvent& e : events) {
    if (e.has_layer()) current_layer = e.layer().layer();
    if (!e.has_attention() || e.attention().layer() != layer || e.attention().head() != head) {
      continue;
    }
    const v1::TensorChunk& c = e.attention();
    EXPECT_EQ(current_layer, layer) << "chunk before its layer event";
    EXPECT_EQ(c.name(), "attention");
    EXPECT_THAT(Vec(c.shape()), ElementsAre(t, t));
    EXPECT_EQ(c.dtype(), dtype);
    EXPECT_EQ(c.offset(), static_cast<int64_t>(data.size()));
    EXPECT_LE(c.data().size(), size_t{1} << 20);
    EXPECT_EQ(c.total_bytes(), t * t * (dtype == v1::TENSOR_DTYPE_FLOAT16 ? 2 : 4));
    data += c.data();
    ++*chunks;
  }
  return data;
}

class AttentionTest : public RpcTest {
 protected:
  // Requests layers {1, 4} x heads {0, 5} of a T-token prompt and checks
  // every (layer, head) against a full recording. Returns the chunk count of
  // (4, 5).
  int CheckAttention(int64_t t, v1::TensorDtype dtype) {
    const std::vector<int64_t> ids = SampleIds(static_cast<size_t>(t));
    v1::AnalyzeRequest request = IdsRequest(ids);
    v1::AnalyzeOptions* o = request.mutable_options();
    o->set_return_attention(true);
    o->add_attention_layers(4);
    o->add_attention_layers(1);
    o->add_attention_heads(5);
    o->add_attention_heads(0);
    o->set_attention_dtype(dtype);
    const AnalyzeResult r = RunAnalyze(*stub_, request);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    const engine::AnalysisRun run = LocalRun(*engine::PromptFromIds(BundledModel(), ids), true);
    const std::vector<float>& all = run.tensors->attentions();  // (L, H, T, T)
    int chunks = 0;
    for (int layer : {1, 4}) {
      for (int head : {0, 5}) {
        const std::string data = CollectTensor(r.events, layer, head, dtype, t, &chunks);
        const float* expected = all.data() + ((layer * 6 + head) * t) * t;
        if (dtype == v1::TENSOR_DTYPE_FLOAT16) {
          std::vector<uint16_t> half(static_cast<size_t>(t * t));
          for (size_t i = 0; i < half.size(); ++i) half[i] = FloatToHalf(expected[i]);
          EXPECT_EQ(data, std::string(reinterpret_cast<const char*>(half.data()), half.size() * 2))
              << "layer " << layer << " head " << head;
        } else {
          EXPECT_EQ(data, std::string(reinterpret_cast<const char*>(expected), t * t * 4))
              << "layer " << layer << " head " << head;
        }
      }
    }
    int other = 0;
    for (const v1::AnalyzeEvent& e : r.events) {
      other += e.has_attention() && (e.attention().layer() % 3 != 1 ||
                                     e.attention().head() % 5 != 0);
    }
    EXPECT_EQ(other, 0) << "chunks of layers or heads that were not requested";
    return chunks;
  }
};

TEST_F(AttentionTest, Float32TensorsEqualAFullRecording) {
  StartServer();
  EXPECT_EQ(CheckAttention(33, v1::TENSOR_DTYPE_FLOAT32), 1);
}

TEST_F(AttentionTest, Float16TensorsAreTheRecordingRoundedToHalf) {
  StartServer();
  EXPECT_EQ(CheckAttention(33, v1::TENSOR_DTYPE_FLOAT16), 1);
}

TEST_F(AttentionTest, LongPromptFillsExactlyOneMebibyteChunk) {
  StartServer();
  // 512 x 512 float32 is exactly 1 MiB: one full chunk, not two.
  EXPECT_EQ(CheckAttention(512, v1::TENSOR_DTYPE_FLOAT32), 1);
}

TEST_F(AttentionTest, LongPromptSplitsIntoChunksInOrder) {
  StartServer({"--tensor-chunk-bytes", "100000"});
  // 1 MiB in chunks of 100000 bytes: 10 full ones and a last of 48576.
  EXPECT_EQ(CheckAttention(512, v1::TENSOR_DTYPE_FLOAT32), 11);
  // float16: 524288 bytes -> 6 chunks.
  EXPECT_EQ(CheckAttention(512, v1::TENSOR_DTYPE_FLOAT16), 6);
}

TEST_F(RpcTest, HealthCheckReportsServing) {
  StartServer();
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  for (const std::string service : {"", "attnscope.v1.Analyzer"}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << "service '" << service << "': " << status.error_code() << " "
                             << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

using FieldSet = std::unique_ptr<google::protobuf::UnknownFieldSet>;

FieldSet Parse(const std::string& bytes) {
  auto fields = std::make_unique<google::protobuf::UnknownFieldSet>();
  EXPECT_TRUE(fields->ParseFromString(bytes));
  return fields;
}

// One round trip on grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo
// with raw bytes (the reflection stubs are not installed, and a second copy
// of reflection.proto must never be linked). Field numbers from
// grpc/reflection/v1alpha/reflection.proto.
FieldSet Reflect(const std::string& address, const std::string& request) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &context));
  grpc::Slice slice(request);
  EXPECT_TRUE(stream->Write(grpc::ByteBuffer(&slice, 1)));
  stream->WritesDone();
  grpc::ByteBuffer reply;
  EXPECT_TRUE(stream->Read(&reply));
  EXPECT_TRUE(stream->Finish().ok());
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return Parse(bytes);
}

// The length-delimited field `number` of `fields`, each parsed as a message.
std::vector<FieldSet> Messages(const google::protobuf::UnknownFieldSet& fields, int number) {
  std::vector<FieldSet> out;
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == number) out.push_back(Parse(fields.field(i).length_delimited()));
  }
  return out;
}

TEST_F(RpcTest, ReflectionListsAndDescribesTheAnalyzerService) {
  StartServer();
  // ServerReflectionRequest{list_services (7): ""}
  const FieldSet listed = Reflect(server_->address(), std::string("\x3a\x00", 2));
  std::vector<std::string> names;
  // ServerReflectionResponse.list_services_response (6) -> service (1) -> name (1)
  for (const FieldSet& list : Messages(*listed, 6)) {
    for (const FieldSet& service : Messages(*list, 1)) {
      names.push_back(service->field(0).length_delimited());
    }
  }
  EXPECT_THAT(names, ::testing::Contains("attnscope.v1.Analyzer"));

  // ServerReflectionRequest{file_containing_symbol (4): "attnscope.v1.Analyzer"}
  const std::string symbol = "attnscope.v1.Analyzer";
  const FieldSet described = Reflect(
      server_->address(), std::string("\x22", 1) + static_cast<char>(symbol.size()) + symbol);
  // file_descriptor_response (4) -> file_descriptor_proto (1), serialized
  const std::vector<FieldSet> files = Messages(*described, 4);
  ASSERT_EQ(files.size(), 1u);
  bool found = false;
  for (int i = 0; i < files[0]->field_count(); ++i) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(files[0]->field(i).length_delimited()));
    if (file.package() != "attnscope.v1") continue;
    ASSERT_EQ(file.service_size(), 1);
    EXPECT_EQ(file.service(0).name(), "Analyzer");
    std::vector<std::string> methods;
    for (const auto& m : file.service(0).method()) methods.push_back(m.name());
    EXPECT_THAT(methods, ElementsAre("ListModels", "Analyze", "Generate", "Subscribe",
                                      "EvaluateEviction", "Tokenize", "ScanHeads", "Ablate", "Lens",
                                      "Patch"));
    found = true;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace attnscope::testing
