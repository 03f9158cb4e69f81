#include "service/model/compute_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace attnscope::model {

absl::StatusOr<Precision> ParsePrecision(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "float32" || n == "fp32") return Precision::kFloat32;
  if (n == "bf16" || n == "bfloat16") return Precision::kBfloat16;
  if (n == "auto") return Precision::kAuto;
  return absl::InvalidArgumentError(absl::StrCat(
      "precision '", name, "' is not supported; use float32 (the default), bf16 or auto"));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kBfloat16:
      return "bf16";
    case Precision::kAuto:
      return "auto";
    case Precision::kFloat32:
      break;
  }
  return "float32";
}

absl::StatusOr<DeviceKind> ParseDeviceKind(const std::string& name) {
  if (name == "cpu") return DeviceKind::kCpu;
  if (name == "cuda") return DeviceKind::kCuda;
  if (name == "auto") return DeviceKind::kAuto;
  return absl::InvalidArgumentError(
      absl::StrCat("device '", name, "' is not supported; use cpu, cuda or auto"));
}

const char* DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kAuto:
      return "auto";
  }
  return "cpu";
}

bool BuiltWithCuda() {
#if ATTNSCOPE_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace attnscope::model
