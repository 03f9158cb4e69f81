#include "tests/deploy/model_sizing.h"

#include <algorithm>

namespace attnscope::deploy::testing {

const std::vector<ModelShape>& KnownModelShapes() {
  // Shapes from each repository's config.json (the same ones
  // tests/common/real_checkpoint.cc holds); sizes of the released
  // model*.safetensors files (Llama-3.1-8B: model.safetensors.index.json's
  // total_size; tiny-gpt2: models/tiny-gpt2 here, checked by the test).
  static const std::vector<ModelShape> shapes = {
      // name, dtype, file bytes, layers, width, kv heads, head_dim, MLP, vocab, positions
      {"tiny-gpt2", "F16", 24841808, 6, 192, 6, 32, 768, 50257, 512},
      {"gpt2", "F32", 548105171, 12, 768, 12, 64, 3072, 50257, 1024},
      {"Qwen2.5-0.5B", "BF16", 988097824, 24, 896, 2, 64, 4864, 151936, 32768},
      {"Llama-3.2-1B", "BF16", 2471645608, 16, 2048, 8, 64, 8192, 128256, 131072},
      {"Llama-3.1-8B", "BF16", 16060522496, 32, 4096, 8, 128, 14336, 128256, 131072},
  };
  return shapes;
}

const ModelShape* FindModelShape(const std::string& name) {
  for (const ModelShape& shape : KnownModelShapes()) {
    if (shape.name == name) return &shape;
  }
  return nullptr;
}

int64_t LongestSequence(const ModelShape& model, const RequestLimits& limits) {
  const int64_t prompt = limits.max_prompt_tokens > 0 ? limits.max_prompt_tokens : model.positions;
  const int64_t fresh = limits.max_new_tokens > 0 ? limits.max_new_tokens : model.positions;
  // A generation stops at the model's positions (engine/generation.cc).
  return std::min(model.positions, prompt + fresh);
}

double HeldWeightBytes(const ModelShape& model) {
  const double factor = model.dtype == "BF16" ? 1.0 : model.dtype == "F32" ? 1.5 : 3.0;
  return model.file_bytes * factor;
}

double WorkspacePerToken(const ModelShape& model) {
  const double l = model.layers, d = model.width;
  return 4.0 * (2 * l * model.kv_heads * model.head_dim + (l + 1) * d +
                2.0 * model.intermediate + 8 * d);
}

double WorkspaceBytes(const ModelShape& model, int64_t tokens, double raw_attention_bytes) {
  return static_cast<double>(std::min(tokens, model.positions)) * WorkspacePerToken(model) +
         kLogitBlockRows * static_cast<double>(model.vocab) * 4 + kAttentionBlockBytes +
         raw_attention_bytes;
}

MemoryEstimate EstimateMemory(const std::vector<const ModelShape*>& models,
                              const RequestLimits& limits) {
  MemoryEstimate out;
  out.baseline = kBaselineBytes;
  double workspace = 0;
  for (const ModelShape* model : models) {
    out.weights += HeldWeightBytes(*model);
    workspace = std::max(workspace, WorkspaceBytes(*model, LongestSequence(*model, limits),
                                                   limits.raw_attention_bytes));
  }
  out.workspace = static_cast<double>(limits.max_concurrent) * workspace;
  return out;
}

}  // namespace attnscope::deploy::testing
