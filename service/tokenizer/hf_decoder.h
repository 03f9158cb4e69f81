// tokenizer.json decoders (ByteLevel, ByteFallback, Metaspace, Replace,
// Fuse, Strip, Sequence): token strings back to text, as Hugging Face's
// decode_chain does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace attnscope::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings (a decoder may fuse them).
  virtual absl::Status DecodeChain(std::vector<std::string>& tokens) const = 0;
  // True if this decoder (or one inside it) maps byte-level symbols back to
  // bytes.
  virtual bool IsByteLevel() const { return false; }
  // The symbol this decoder turns back into a space ("▁"), or "".
  virtual std::string SpaceMarker() const { return ""; }
};

// Builds the decoder of `json` (null gives nullptr); errors name `file` and
// the JSON `path`.
absl::StatusOr<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& json,
                                                      const std::string& path,
                                                      const std::string& file);

// The byte a "<0xNN>" token stands for, or -1.
int ByteFallbackValue(const std::string& token);

}  // namespace attnscope::tokenizer
