// The server on Llama-family checkpoints: ListModels describes them and
// Analyze reproduces Hugging Face's statistics (stats.json) with no change to
// the service.
#include <cmath>
#include <fstream>

#include "nlohmann/json.hpp"
#include "tests/rpc/rpc_test_util.h"

namespace attnscope::testing {
namespace {

std::string FamilyDir(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

nlohmann::json Stats(const std::string& name) {
  std::ifstream in(FamilyDir(name) + "/stats.json");
  return nlohmann::json::parse(in);
}

// Largest |a[i] - b[i]|; NaN or a size mismatch gives infinity.
double MaxDiff(const google::protobuf::RepeatedField<double>& a, const nlohmann::json& b) {
  if (a.size() != static_cast<int>(b.size())) return INFINITY;
  double m = 0;
  for (int i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i].get<double>());
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

TEST_F(RpcTest, ListModelsDescribesFamilies) {
  StartServer({"--model", "gemma=" + FamilyDir("gemma2"), "--model", "neox=" + FamilyDir("gpt_neox"),
               "--model", "gpt2=" + FixtureModelDir()});
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(stub_->ListModels(&context, v1::ListModelsRequest(), &response).ok());
  ASSERT_EQ(response.models_size(), 3);
  const v1::ModelInfo& gemma = response.models(0);
  EXPECT_EQ(gemma.architecture(), "gemma2");
  EXPECT_EQ(gemma.num_layers(), 4);
  EXPECT_EQ(gemma.num_heads(), 4);
  EXPECT_EQ(gemma.num_kv_heads(), 2);
  EXPECT_EQ(gemma.head_dim(), 32);
  EXPECT_EQ(gemma.hidden_size(), 64);
  EXPECT_EQ(gemma.intermediate_size(), 128);
  EXPECT_EQ(gemma.rope_kind(), "default");
  EXPECT_EQ(gemma.rope_theta(), 10000.0);
  EXPECT_EQ(gemma.rotary_dim(), 32);
  EXPECT_EQ(gemma.sliding_window(), 12);
  EXPECT_EQ(gemma.sliding_layers(), 2);
  EXPECT_EQ(gemma.norm(), "rms_norm_plus_one");
  EXPECT_TRUE(gemma.tied_head());
  EXPECT_EQ(gemma.dtype(), "float32");
  EXPECT_FALSE(gemma.has_tokenizer());
  const v1::ModelInfo& neox = response.models(1);
  EXPECT_EQ(neox.architecture(), "gpt_neox");
  EXPECT_EQ(neox.rotary_dim(), 4);  // 25% of 16
  EXPECT_EQ(neox.sliding_window(), 0);
  EXPECT_EQ(neox.norm(), "layer_norm");
  EXPECT_FALSE(neox.tied_head());
  const v1::ModelInfo& gpt2 = response.models(2);
  EXPECT_EQ(gpt2.rope_kind(), "none");
  EXPECT_EQ(gpt2.rotary_dim(), 0);
}

TEST_F(RpcTest, AnalyzeOnLlamaFamiliesMatchesHuggingFacesStatistics) {
  StartServer({"--model", "llama=" + FamilyDir("llama"), "--model", "mistral=" + FamilyDir("mistral")});
  for (const std::string name : {"llama", "mistral"}) {
    const nlohmann::json stats = Stats(name);
    v1::AnalyzeRequest request = IdsRequest(stats["input_ids"].get<std::vector<int64_t>>());
    request.set_model(name);
    const AnalyzeResult r = RunAnalyze(*stub_, request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    int layers = 0;
    for (const v1::AnalyzeEvent& e : r.events) layers += e.has_layer();
    EXPECT_EQ(layers, 3) << name;
    ASSERT_TRUE(r.events.back().has_summary());
    const v1::Summary& sum = r.events.back().summary();
    EXPECT_NEAR(sum.health(), stats["health"].get<double>(), 1e-5) << name;
    EXPECT_LE(MaxDiff(sum.received(), stats["received"]), 1e-5) << name;
    EXPECT_LE(MaxDiff(sum.z(), stats["z"]), 1e-4) << name;
    EXPECT_LE(MaxDiff(sum.next_token_entropy_nats(), stats["next_token_entropy_nats"]), 1e-5)
        << name;
  }
}

}  // namespace
}  // namespace attnscope::testing
