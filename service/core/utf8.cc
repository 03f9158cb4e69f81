#include "service/core/utf8.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attnscope {
namespace {

// The outcome of decoding the sequence that starts at one byte.
struct Decoded {
  size_t length;       // Bytes consumed: the sequence, or its maximal invalid subpart.
  const char* error;   // nullptr for a well-formed sequence.
};

// Allowed range of the second byte after `lead` (Unicode Table 3-7); the
// narrowed ranges are what exclude overlong forms, surrogates and code points
// above U+10FFFF.
bool SecondByteRange(uint8_t lead, uint8_t* low, uint8_t* high, size_t* length) {
  *low = 0x80;
  *high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    *length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    *length = 3;
    if (lead == 0xE0) *low = 0xA0;
    if (lead == 0xED) *high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    *length = 4;
    if (lead == 0xF0) *low = 0x90;
    if (lead == 0xF4) *high = 0x8F;
  } else {
    return false;
  }
  return true;
}

const char* LeadByteError(uint8_t lead) {
  if (lead >= 0x80 && lead <= 0xBF) return "unexpected continuation byte";
  if (lead == 0xC0 || lead == 0xC1) return "overlong encoding";
  if (lead >= 0xF5 && lead <= 0xF7) return "code point above U+10FFFF";
  return "byte never valid in UTF-8";
}

const char* SecondByteError(uint8_t lead, uint8_t second) {
  if ((second & 0xC0) != 0x80) return "truncated sequence";
  if (lead == 0xE0 || lead == 0xF0) return "overlong encoding";
  if (lead == 0xED) return "UTF-16 surrogate";
  if (lead == 0xF4) return "code point above U+10FFFF";
  return "truncated sequence";
}

Decoded DecodeAt(std::string_view text, size_t pos) {
  const uint8_t lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return {1, nullptr};
  uint8_t low, high;
  size_t length = 0;
  if (!SecondByteRange(lead, &low, &high, &length)) return {1, LeadByteError(lead)};
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {i, "truncated sequence at end of input"};
    const uint8_t byte = static_cast<uint8_t>(text[pos + i]);
    const bool in_range = i == 1 ? (byte >= low && byte <= high) : (byte & 0xC0) == 0x80;
    if (!in_range) return {i, i == 1 ? SecondByteError(lead, byte) : "truncated sequence"};
  }
  return {length, nullptr};
}

}  // namespace

absl::Status ValidateUtf8(std::string_view text, std::string_view what) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Decoded decoded = DecodeAt(text, pos);
    if (decoded.error != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: invalid UTF-8 at byte %d (0x%02x): %s",
                          absl::string_view(what.data(), what.size()), pos,
                          static_cast<uint8_t>(text[pos]), decoded.error));
    }
    pos += decoded.length;
  }
  return absl::OkStatus();
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  // Unencodable values (surrogates, above U+10FFFF) become U+FFFD so the
  // output is always valid UTF-8.
  if ((code_point >= 0xD800 && code_point <= 0xDFFF) || code_point > 0x10FFFF) {
    code_point = 0xFFFD;
  }
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Decoded decoded = DecodeAt(bytes, pos);
    if (decoded.error != nullptr) {
      AppendUtf8(0xFFFD, &out);
    } else {
      out.append(bytes.substr(pos, decoded.length));
    }
    pos += decoded.length;
  }
  return out;
}

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  return 4;
}

}  // namespace attnscope
