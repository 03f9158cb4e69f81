// Altered copies of checkpoints for tests, made at run time with the
// project's own safetensors writer: another config.json, or every weight
// rounded to bfloat16 (stored as BF16, or as the float32 values it holds).
// Needs only attnscope::core, so CLI and server tests can use it too.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"

namespace attnscope::reference {

// A fresh directory under the system temp folder, unique per process and
// object (two suite runs may overlap), removed with the object.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Copies checkpoint `from` into `to`, with config.json's top-level fields in
// `overrides` (JSON values as text, e.g. {"activation_function", "\"relu\""})
// replaced.
absl::Status CopyWithConfig(const std::string& from, const std::string& to,
                            const std::map<std::string, std::string>& overrides);

// float32 -> bfloat16 bits, round to nearest even (what PyTorch's .bfloat16() does).
uint16_t FloatToBFloat16(float value);

// Rewrites every floating tensor of checkpoint `from` (one model.safetensors)
// into `to`: as BF16 (bf16 = true), or as the float32 values those BF16 bits
// hold (bf16 = false), so the two copies hold the same weights. config.json
// is copied with torch_dtype set to match.
absl::Status WriteRoundedCopy(const std::string& from, const std::string& to, bool bf16);

}  // namespace attnscope::reference
