#include "service/engine/model_bundle.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "service/core/status_macros.h"
#include "service/tokenizer/gpt2_tokenizer.h"

namespace attnscope::engine {

namespace {

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

absl::StatusOr<std::unique_ptr<ModelBundle>> LoadModelBundle(const std::string& directory) {
  auto bundle = std::make_unique<ModelBundle>();
  bundle->directory = directory;
  {
    TerminalProgress progress(directory);
    ATTNSCOPE_ASSIGN_OR_RETURN(bundle->model,
                               model::LoadLanguageModel(directory, progress.Callback()));
  }
  const std::filesystem::path dir(directory);
  // vocab.json + merges.txt are GPT-2's byte-level BPE only for GPT-2 and OPT;
  // Qwen2 ships the same file names with another pre-tokenizer, so other
  // families take ids until their tokenizer.json is supported.
  const std::string& family = bundle->model->config().model_type;
  const bool gpt2_bpe = family == "gpt2" || family == "opt";
  if (gpt2_bpe &&
      (std::filesystem::exists(dir / "vocab.json") || std::filesystem::exists(dir / "merges.txt"))) {
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
