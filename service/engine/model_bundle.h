// A loaded model directory: the language model and, when the directory has
// one, its tokenizer. Shared by the CLI and the server.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/model/language_model.h"
#include "service/tokenizer/tokenizer.h"

namespace attnscope::engine {

struct ModelBundle {
  std::string directory;
  std::unique_ptr<model::LanguageModel> model;
  // nullptr when the directory holds no tokenizer files (prompts must then be
  // given as token ids).
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;

  const model::ModelConfig& config() const { return model->config(); }
};

// Loads config.json + safetensors weights (with a progress line on stderr
// when it is a terminal), and for GPT-2 and OPT vocab.json + merges.txt when
// present; other families take prompts as ids. Errors name the directory and
// the file at fault.
absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& directory);

// The bundled default model: $ATTNSCOPE_MODEL_DIR if set, else the
// models/tiny-gpt2 directory of the source tree this binary was built from.
std::string DefaultModelDirectory();

}  // namespace attnscope::engine
