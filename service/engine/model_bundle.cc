#include "service/engine/model_bundle.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "service/core/status_macros.h"
#include "service/model/default_model.h"
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

// On a terminal, one line on stderr rewritten as tensors are converted
// ("loading DIR: 41% of 2.47 GiB"); nothing when stderr is a file or pipe.
class TerminalProgress {
 public:
  explicit TerminalProgress(std::string directory) : directory_(std::move(directory)) {}
  model::LoadProgressCallback Callback() {
    if (isatty(STDERR_FILENO) == 0) return nullptr;
    return [this](const model::LoadProgress& p) {
      const int percent =
          p.bytes_total > 0 ? static_cast<int>(100.0 * p.bytes_done / p.bytes_total) : 100;
      if (percent == last_) return;
      last_ = percent;
      const bool gib = p.bytes_total >= (int64_t{1} << 30);
      std::fprintf(stderr, "\rloading %s: %3d%% of %.2f %s", directory_.c_str(), percent,
                   p.bytes_total / (gib ? 1073741824.0 : 1048576.0), gib ? "GiB" : "MiB");
      std::fflush(stderr);
    };
  }
  // Ends the line if one was started (buffers that are not parameters may
  // keep it below 100%).
  ~TerminalProgress() {
    if (last_ >= 0) std::fprintf(stderr, "\n");
  }

 private:
  std::string directory_;
  int last_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(
    const std::string& directory, const model::ModelLoadOptions& options) {
  auto bundle = std::make_unique<ModelBundle>();
  bundle->directory = directory;
  {
    TerminalProgress progress(directory);
    ATTNSCOPE_ASSIGN_OR_RETURN(bundle->model,
                               model::LoadLanguageModel(directory, progress.Callback(), options));
  }
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

std::string DefaultModelDirectory() { return model::DefaultModelDirectory(); }

}  // namespace attnscope::engine
