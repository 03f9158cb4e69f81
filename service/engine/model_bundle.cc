#include "service/engine/model_bundle.h"

#include <cstdlib>
#include <filesystem>

#include "service/core/status_macros.h"
#include "service/tokenizer/sentencepiece_tokenizer.h"

namespace attnscope::engine {
namespace {

// Fills the tokenizer and chat template of `bundle` from its directory.
void LoadTokenizerParts(ModelBundle& bundle) {
  auto tok = tokenizer::LoadTokenizer(bundle.directory);
  if (tok.ok()) {
    bundle.tokenizer = std::move(tok).value();
  } else {
    bundle.tokenizer_status = tok.status();
  }
  auto chat = chat_template::LoadModelChatTemplate(bundle.directory);
  if (chat.ok()) {
    bundle.chat = std::make_unique<chat_template::ModelChatTemplate>(std::move(chat).value());
  } else {
    bundle.chat_template_status = chat.status();
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& directory) {
  auto bundle = std::make_unique<ModelBundle>();
  bundle->directory = directory;
  ATTNSCOPE_ASSIGN_OR_RETURN(bundle->model, model::LoadLanguageModel(directory));
  LoadTokenizerParts(*bundle);
  return bundle;
}

absl::StatusOr<std::unique_ptr<ModelBundle>> LoadTokenizerBundle(const std::string& directory) {
  auto bundle = std::make_unique<ModelBundle>();
  bundle->directory = directory;
  LoadTokenizerParts(*bundle);
  if (bundle->tokenizer == nullptr) return bundle->tokenizer_status;
  return bundle;
}

std::string DefaultModelDirectory() {
  if (const char* env = std::getenv("ATTNSCOPE_MODEL_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return ATTNSCOPE_DEFAULT_MODEL_DIR;
}

}  // namespace attnscope::engine
