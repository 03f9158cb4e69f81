#include "service/engine/model_bundle.h"

#include <cstdlib>
#include <filesystem>

#include "service/core/status_macros.h"
#include "service/tokenizer/gpt2_tokenizer.h"

namespace attnscope::engine {

absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& directory) {
  auto bundle = std::make_unique<ModelBundle>();
  bundle->directory = directory;
  ATTNSCOPE_ASSIGN_OR_RETURN(bundle->model, model::LoadLanguageModel(directory));
  const std::filesystem::path dir(directory);
  if (std::filesystem::exists(dir / "vocab.json") || std::filesystem::exists(dir / "merges.txt")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(bundle->tokenizer, tokenizer::Gpt2Tokenizer::Load(directory));
  }
  return bundle;
}

std::string DefaultModelDirectory() {
  if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return ATTNSCOPE_DEFAULT_MODEL_DIR;
}

}  // namespace attnscope::engine
