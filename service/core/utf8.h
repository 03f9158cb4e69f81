// UTF-8 validation and decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace attnscope {

// OK if `text` is well-formed UTF-8 (no overlong forms, no surrogates, no
// code points above U+10FFFF); otherwise InvalidArgument naming `what` and the
// byte offset of the first bad sequence, e.g.
// "text: invalid UTF-8 at byte 3 (0xff): byte never valid in UTF-8" (the
// offset is that of the sequence's first byte; the reason follows it).
absl::Status ValidateUtf8(std::string_view text, std::string_view what = "text");

// Appends the UTF-8 encoding of `code_point` to `out`. A value that has no
// encoding (a surrogate D800-DFFF or above U+10FFFF) appends U+FFFD instead.
void AppendUtf8(uint32_t code_point, std::string* out);

// Length in bytes of the UTF-8 sequence whose first byte is `lead`, from its
// high bits alone: 1 for 0xxxxxxx, 2 for 110xxxxx, 3 for 1110xxxx, else 4.
// For text already known to be valid UTF-8.
size_t Utf8SequenceLength(unsigned char lead);

// Replaces every invalid sequence by U+FFFD (one per maximal invalid
// subpart, as the Unicode standard recommends): what a lossy decoder shows.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace attnscope
