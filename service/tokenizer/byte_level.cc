#include "service/tokenizer/byte_level.h"

#include <array>

#include "service/core/utf8.h"

namespace attnscope::tokenizer {
namespace {

bool MapsToItself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> symbol_of_byte{};
  // Every symbol is below U+0100 + 68, so a flat table covers them all.
  std::array<int16_t, 0x100 + 68> byte_of_symbol{};
};

ByteTables BuildTables() {
  ByteTables t;
  t.byte_of_symbol.fill(-1);
  uint32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = MapsToItself(b) ? static_cast<uint32_t>(b) : next_extra++;
    t.symbol_of_byte[b] = cp;
    t.byte_of_symbol[cp] = static_cast<int16_t>(b);
  }
  return t;
}

const ByteTables& Tables() {
  static const ByteTables tables = BuildTables();
  return tables;
}

// Decodes one UTF-8 code point starting at `*pos` and advances past it;
// false on a truncated, malformed or overlong sequence. Only code points
// below U+0800 matter to the caller, so surrogates need no special case.
bool NextCodePoint(std::string_view s, size_t* pos, uint32_t* cp) {
  const auto lead = static_cast<uint8_t>(s[*pos]);
  int extra = 0;
  if (lead < 0x80) {
    *cp = lead;
  } else if ((lead & 0xE0) == 0xC0) {
    *cp = lead & 0x1F;
    extra = 1;
  } else if ((lead & 0xF0) == 0xE0) {
    *cp = lead & 0x0F;
    extra = 2;
  } else if ((lead & 0xF8) == 0xF0) {
    *cp = lead & 0x07;
    extra = 3;
  } else {
    return false;
  }
  if (s.size() - *pos <= static_cast<size_t>(extra)) return false;
  for (int i = 1; i <= extra; ++i) {
    const auto c = static_cast<uint8_t>(s[*pos + i]);
    if ((c & 0xC0) != 0x80) return false;
    *cp = (*cp << 6) | (c & 0x3F);
  }
  const int shortest = *cp < 0x80 ? 0 : *cp < 0x800 ? 1 : *cp < 0x10000 ? 2 : 3;
  if (extra != shortest) return false;
  *pos += 1 + extra;
  return true;
}

}  // namespace

uint32_t ByteToSymbol(uint8_t byte) { return Tables().symbol_of_byte[byte]; }

int SymbolToByte(uint32_t code_point) {
  const ByteTables& t = Tables();
  if (code_point >= t.byte_of_symbol.size()) return -1;
  return t.byte_of_symbol[code_point];
}

std::string ByteSymbolUtf8(uint8_t byte) {
  std::string out;
  AppendUtf8(ByteToSymbol(byte), &out);
  return out;
}

bool SymbolsToBytes(std::string_view symbols, std::string* out) {
  size_t pos = 0;
  while (pos < symbols.size()) {
    uint32_t cp = 0;
    if (!NextCodePoint(symbols, &pos, &cp)) return false;
    const int byte = SymbolToByte(cp);
    if (byte < 0) return false;
    out->push_back(static_cast<char>(byte));
  }
  return true;
}

}  // namespace attnscope::tokenizer
