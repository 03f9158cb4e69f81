// A loaded model directory: the language model and, when the directory has
// one, its tokenizer. Shared by the CLI and the server.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/chat_template/chat_template.h"
#include "service/model/language_model.h"
#include "service/tokenizer/tokenizer.h"

namespace attnscope::engine {

struct ModelBundle {
  std::string directory;
  std::unique_ptr<model::LanguageModel> model;
  // nullptr when the directory holds no tokenizer files, or when they failed
  // to load (prompts must then be given as token ids).
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  // Why `tokenizer` is nullptr: NotFound (no tokenizer files) or the
  // loader's error naming the file (e.g. an unsupported tokenizer.json
  // component). A model with a broken tokenizer still serves id prompts.
  absl::Status tokenizer_status;
  // The chat template (tokenizer_config.json / chat_template.jinja) and the
  // special-token variables Hugging Face passes with it; nullptr when there
  // is none or it failed to parse (chat_template_status says which).
  std::unique_ptr<chat_template::ModelChatTemplate> chat;
  absl::Status chat_template_status;

  const model::ModelConfig& config() const { return model->config(); }
};

// Loads config.json + safetensors weights (with a progress line on stderr
// when it is a terminal), and the tokenizer (tokenizer::LoadTokenizer) and
// chat template when present. Errors name the directory and the file at
// fault; a tokenizer or chat template that fails to load does not fail the
// model (see tokenizer_status, chat_template_status). The weights go to
// `options.device` (FailedPrecondition for a device this build lacks).
absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(
    const std::string& directory, const model::ModelLoadOptions& options = {});

// The tokenizer and chat template of `directory` alone (no weights: for
// `attnscope tokenize` on a directory of tokenizer files). `model` is null.
// The tokenizer's error when it cannot be loaded.
absl::StatusOr<std::unique_ptr<ModelBundle>> LoadTokenizerBundle(const std::string& directory);

// The bundled default model: $ATTNSCOPE_MODEL_DIR if set, else the
// models/tiny-gpt2 directory of the source tree this binary was built from.
std::string DefaultModelDirectory();

}  // namespace attnscope::engine
