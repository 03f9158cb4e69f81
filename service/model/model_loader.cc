#include <ATen/Parallel.h>

#include <thread>

#include "service/core/safetensors.h"
#include "service/core/status_macros.h"
#include "service/model/decoder_model.h"
#include "service/model/language_model.h"

namespace attnscope::model {

absl::StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(
    const std::string& dir, const LoadProgressCallback& progress,
    const ModelLoadOptions& options) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> checkpoint,
                             SafetensorsCheckpoint::OpenDirectory(dir));
  return LoadDecoder(config, std::move(checkpoint), progress, options);
}

int SetComputeThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  return at::get_num_threads();
}

}  // namespace attnscope::model
