// Fuzz target: request validation. Each input is parsed as an
// AnalyzeRequest, a GenerateRequest, a LensRequest and a PatchRequest (the
// bytes gRPC would hand the service), and each parsed request goes through
// the checks the service runs before any forward pass (PlanAnalysis,
// ResolvePrompt, the generation settings, LensSettingsOf and
// ResolveLensPrompt, PatchSettingsOf), against two real bundles:
// models/tiny-gpt2's config and tokenizer, once without and once with Llama
// 3's chat template. A request that passes must be one the engine can run:
// ids within the vocabulary, no more tokens than positions, selections in
// model order inside the model, positions inside the prompt, targets inside
// the vocabulary.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attnscope/v1/attnscope.pb.h"
#include "service/chat_template/chat_template.h"
#include "service/engine/generation.h"
#include "service/model/language_model.h"
#include "service/rpc/lens_validation.h"
#include "service/rpc/request_validation.h"
#include "service/tokenizer/sentencepiece_tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace analysis = attnscope::analysis;
namespace engine = attnscope::engine;
namespace model = attnscope::model;
namespace rpc = attnscope::rpc;
namespace v1 = attnscope::v1;

// The seam that keeps libtorch out of this target: validation only reads a
// model's config, so the bundle carries the real config.json's ModelConfig
// behind a LanguageModel that refuses to run (nothing here may run it).
class ConfigOnlyModel final : public model::LanguageModel {
 public:
  explicit ConfigOnlyModel(model::ModelConfig config) : config_(std::move(config)) {}
  const model::ModelConfig& config() const override { return config_; }
  absl::Status Forward(const std::vector<std::vector<int64_t>>&, const model::ForwardOptions&,
                       const std::vector<model::ForwardObserver*>&) const override {
    return absl::UnimplementedError("the request fuzz target never runs a model");
  }
  std::unique_ptr<model::KvCache> NewCache() const override { return nullptr; }

 private:
  model::ModelConfig config_;
};

std::unique_ptr<engine::ModelBundle> TinyGpt2Bundle(bool with_chat_template) {
  const std::string dir = attnscope::fuzz::ModelsDir() + "/tiny-gpt2";
  auto bundle = std::make_unique<engine::ModelBundle>();
  bundle->directory = dir;
  auto config = model::LoadModelConfig(dir);
  FUZZ_CHECK(config.ok(), config.status().ToString());
  bundle->model = std::make_unique<ConfigOnlyModel>(*config);
  auto tok = attnscope::tokenizer::LoadTokenizer(dir);
  FUZZ_CHECK(tok.ok(), tok.status().ToString());
  bundle->tokenizer = std::move(tok).value();
  if (!with_chat_template) {
    bundle->chat_template_status = absl::NotFoundError("no chat template");
    return bundle;
  }
  const std::string llama3 = attnscope::fuzz::TestDataDir() + "/tokenizers/llama3";
  auto chat = attnscope::chat_template::LoadModelChatTemplate(llama3);
  FUZZ_CHECK(chat.ok(), chat.status().ToString());
  bundle->chat = std::make_unique<attnscope::chat_template::ModelChatTemplate>(*std::move(chat));
  return bundle;
}

void CheckPrompt(const engine::Prompt& prompt, const model::ModelConfig& config) {
  FUZZ_CHECK(!prompt.ids.empty(), "an empty prompt passed");
  FUZZ_CHECK(static_cast<int64_t>(prompt.ids.size()) <= config.max_positions, "too long");
  for (int64_t id : prompt.ids) {
    FUZZ_CHECK(id >= 0 && id < config.vocab_size, std::to_string(id));
  }
}

void CheckAnalyze(const v1::AnalyzeRequest& request, const engine::ModelBundle& bundle) {
  const model::ModelConfig& config = bundle.config();
  auto plan = rpc::PlanAnalysis(request.options(), bundle, "tiny-gpt2", rpc::AnalyzeLimits{});
  if (plan.ok() && request.options().return_attention()) {
    // Every selection in model order, each once, inside the model, never empty.
    auto check = [](const std::vector<int64_t>& picked, int64_t limit, const char* what) {
      FUZZ_CHECK(!picked.empty(), what);
      for (size_t i = 0; i < picked.size(); ++i) {
        FUZZ_CHECK(picked[i] >= 0 && picked[i] < limit, what);
        FUZZ_CHECK(i == 0 || picked[i - 1] < picked[i], what);
      }
    };
    check(plan->stream.tensors.attention.layers, config.num_layers, "layers");
    check(plan->stream.tensors.attention.heads, config.num_heads, "heads");
  }
  auto prompt = rpc::ResolvePrompt(rpc::PromptOf(request), bundle, "tiny-gpt2", 0);
  if (prompt.ok()) CheckPrompt(*prompt, config);
}

void CheckGenerate(const v1::GenerateRequest& request, const engine::ModelBundle& bundle) {
  auto prompt = rpc::ResolvePrompt(rpc::PromptOf(request), bundle, "tiny-gpt2", 0);
  if (!prompt.ok()) return;
  CheckPrompt(*prompt, bundle.config());
  const engine::GenerationSettings settings = rpc::GenerationSettingsOf(request);
  if (engine::ValidateGenerationSettings(bundle, *prompt, settings).ok()) {
    FUZZ_CHECK(settings.max_new_tokens >= 1, "max_new_tokens");
    FUZZ_CHECK(static_cast<int64_t>(prompt->ids.size()) + settings.max_new_tokens <=
                   bundle.config().max_positions,
               "positions");
  }
}

// Sorted, each once, inside [0, limit).
void CheckPositions(const std::vector<int64_t>& positions, int64_t limit, const char* what) {
  for (size_t i = 0; i < positions.size(); ++i) {
    FUZZ_CHECK(positions[i] >= 0 && positions[i] < limit, what);
    FUZZ_CHECK(i == 0 || positions[i - 1] < positions[i], what);
  }
}

void CheckLens(const v1::LensRequest& request, const engine::ModelBundle& bundle) {
  const int64_t vocab = bundle.config().vocab_size;
  auto settings = rpc::LensSettingsOf(request, bundle, model::Precision::kFloat32);
  if (!settings.ok()) return;
  FUZZ_CHECK(settings->lens || settings->attribution || settings->rollout, "nothing asked");
  FUZZ_CHECK(settings->lens_options.top_k >= 1 && settings->lens_options.top_k <= rpc::kMaxLensTopK,
             "top_k");
  FUZZ_CHECK(settings->query_block_size >= 0, "query_block_size");
  auto prompt = rpc::ResolvePrompt(rpc::PromptOf(request), bundle, "tiny-gpt2", 0);
  if (!prompt.ok()) return;
  CheckPrompt(*prompt, bundle.config());
  const auto tokens = static_cast<int64_t>(prompt->ids.size());
  if (!rpc::ResolveLensPrompt(request, bundle, tokens, *settings).ok()) return;
  CheckPositions(settings->lens_options.positions, tokens, "lens positions");
  CheckPositions(settings->rollout_options.queries, tokens, "rollout queries");
  if (settings->attribution) {
    const analysis::AttributionOptions& a = settings->attribution_options;
    FUZZ_CHECK(!a.positions.empty(), "no attribution position");
    FUZZ_CHECK(static_cast<int64_t>(a.positions.size()) <= a.max_positions, "attribution positions");
    CheckPositions(a.positions, tokens, "attribution positions");
    FUZZ_CHECK(a.targets.size() <= 1 || a.targets.size() == a.positions.size(), "targets");
    for (int64_t id : a.targets) FUZZ_CHECK(id >= 0 && id < vocab, "target id");
  }
}

void CheckPatch(const v1::PatchRequest& request, const engine::ModelBundle& bundle) {
  const int64_t vocab = bundle.config().vocab_size;
  auto settings = rpc::PatchSettingsOf(request, bundle, model::Precision::kFloat32);
  if (!settings.ok()) return;
  for (int64_t id : {settings->token_a, settings->token_b}) {
    FUZZ_CHECK(id == -1 || (id >= 0 && id < vocab), "patch target");
  }
  FUZZ_CHECK(settings->query_block_size >= 0, "query_block_size");
  for (bool clean : {true, false}) {
    const rpc::PromptInput input = rpc::PatchPrompt(request, clean);
    FUZZ_CHECK(input.text != nullptr || input.ids != nullptr, "a patch prompt without a source");
    auto prompt = rpc::ResolvePrompt(input, bundle, "tiny-gpt2", 0);
    if (prompt.ok()) CheckPrompt(*prompt, bundle.config());
  }
}

// Loaded before fuzzing (GPT-2's vocabulary takes a while under ASan), and
// kept for the life of the process.
const engine::ModelBundle* plain = nullptr;
const engine::ModelBundle* chat = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  plain = TinyGpt2Bundle(false).release();
  chat = TinyGpt2Bundle(true).release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::AnalyzeRequest analyze;
  if (analyze.ParseFromArray(data, static_cast<int>(size))) {
    CheckAnalyze(analyze, *plain);
    CheckAnalyze(analyze, *chat);
  }
  v1::GenerateRequest generate;
  if (generate.ParseFromArray(data, static_cast<int>(size))) {
    CheckGenerate(generate, *plain);
    CheckGenerate(generate, *chat);
  }
  v1::LensRequest lens;
  if (lens.ParseFromArray(data, static_cast<int>(size))) {
    CheckLens(lens, *plain);
    CheckLens(lens, *chat);
  }
  v1::PatchRequest patch;
  if (patch.ParseFromArray(data, static_cast<int>(size))) CheckPatch(patch, *plain);
  return 0;
}
