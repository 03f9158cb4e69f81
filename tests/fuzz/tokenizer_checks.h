// The promises of tokenizer.h that the tokenizer fuzz targets check on every
// encoding they get back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "service/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace attnscope::fuzz {

// Every id within the vocabulary, one span per id, each span inside `text`,
// and the ids decode (Decode, TokenBytes and TokenString accept them).
// Returns the decoded text.
inline std::string CheckEncoding(const tokenizer::Tokenizer& tok, std::string_view text,
                                 const tokenizer::Encoding& encoding) {
  FUZZ_CHECK(encoding.ids.size() == encoding.offsets.size(), "one span per id");
  const int64_t size = static_cast<int64_t>(text.size());
  for (size_t i = 0; i < encoding.ids.size(); ++i) {
    const int64_t id = encoding.ids[i];
    FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), std::to_string(id));
    const auto [begin, end] = encoding.offsets[i];
    FUZZ_CHECK(0 <= begin && begin <= end && end <= size,
               std::to_string(begin) + ".." + std::to_string(end));
    FUZZ_CHECK(tok.TokenBytes(id).ok() && tok.TokenString(id).ok(), std::to_string(id));
  }
  auto decoded = tok.Decode(encoding.ids);
  FUZZ_CHECK(decoded.ok(), decoded.status().ToString());
  return *decoded;
}

// Ids made from raw bytes (three bytes each, spread over a little more than
// the vocabulary so that out-of-range ids occur): Decode must either give
// text or an InvalidArgument, never crash.
inline void DecodeArbitraryIds(const tokenizer::Tokenizer& tok, std::string_view bytes) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i + 3 <= bytes.size() && ids.size() < 256; i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]) << 16;
    ids.push_back(static_cast<int64_t>(v % static_cast<uint32_t>(tok.vocab_size() + 8)) - 4);
  }
  auto decoded = tok.Decode(ids);
  if (!decoded.ok()) FUZZ_CHECK(absl::IsInvalidArgument(decoded.status()), decoded.status().ToString());
}

}  // namespace attnscope::fuzz
