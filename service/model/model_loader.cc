#include <ATen/Parallel.h>

#include <thread>

#include "service/core/parallel.h"
#include "service/core/safetensors.h"
#include "service/core/status_macros.h"
#include "service/model/decoder_model.h"
#include "service/model/language_model.h"

namespace attnscope::model {
namespace {

// The statistics' parallel loops (core/parallel.h) on libtorch's intra-op
// pool: the same threads as the forward pass; serial inside its regions.
void AtenParallelFor(int64_t n, int64_t grain, const core::ChunkFn& fn) {
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { fn(begin, end); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<LanguageModel>> LoadLanguageModel(
    const std::string& dir, const LoadProgressCallback& progress,
    const ModelLoadOptions& options) {
  ATTNSCOPE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> checkpoint,
                             SafetensorsCheckpoint::OpenDirectory(dir));
  core::SetParallelForImpl(AtenParallelFor);
  return LoadDecoder(config, std::move(checkpoint), progress, options);
}

int SetComputeThreads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  core::SetParallelForImpl(AtenParallelFor);
  return at::get_num_threads();
}

int ComputeThreads() { return at::get_num_threads(); }

}  // namespace attnscope::model
