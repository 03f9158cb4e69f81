// Where a model runs and in what precision its matrix products are computed.
// Torch-free: the CLI, the server and the rpc layer parse and pass these.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace attnscope::model {

// What the forward pass's matrix products take as operands. Statistics,
// softmax, norms and the residual stream stay float32 either way.
enum class Precision {
  kFloat32,   // everything in float32 (the default)
  kBfloat16,  // operands of every matrix product rounded to bfloat16
  // The checkpoint's own: kBfloat16 for a BF16 checkpoint, kFloat32 for F32
  // (and F16, which has no half-precision kernel here), as Hugging Face's
  // torch_dtype="auto" computes in the stored dtype.
  kAuto,
};

// "float32", "bf16" or "auto" (also "fp32", "bfloat16"); InvalidArgument
// naming the value and the accepted ones otherwise.
absl::StatusOr<Precision> ParsePrecision(const std::string& name);
// "float32", "bf16" or "auto".
const char* PrecisionName(Precision precision);

// Where the weights live and the forward pass runs.
enum class DeviceKind {
  kCpu,
  kCuda,  // the first CUDA device; refused when libtorch has none
  kAuto,  // CUDA when libtorch sees a device, else the CPU
};

// "cpu", "cuda" or "auto"; InvalidArgument naming the value otherwise.
absl::StatusOr<DeviceKind> ParseDeviceKind(const std::string& name);
const char* DeviceKindName(DeviceKind kind);

struct ModelLoadOptions {
  DeviceKind device = DeviceKind::kCpu;
};

// True when this build's libtorch was built with CUDA (CMake found a CUDA
// libtorch through Torch_DIR); false for Debian's CPU libtorch.
bool BuiltWithCuda();

}  // namespace attnscope::model
