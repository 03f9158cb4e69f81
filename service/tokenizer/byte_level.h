// GPT-2's byte <-> symbol map (bytes_to_unicode in OpenAI's encoder.py): every
// byte value gets a printable Unicode code point so BPE vocabularies can be
// stored as text. Printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to
// themselves; the other 68 bytes map to U+0100 + n, n counting them in byte
// order (so ' ' (0x20) -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace attnscope::tokenizer {

// The code point that stands for `byte`.
uint32_t ByteToSymbol(uint8_t byte);

// The byte that `code_point` stands for, or -1 if it is not a byte symbol.
int SymbolToByte(uint32_t code_point);

// The UTF-8 text of the symbol for `byte` (what vocab.json spells it as).
std::string ByteSymbolUtf8(uint8_t byte);

// Converts a vocabulary string (UTF-8 text of byte symbols) back to the bytes
// it stands for, appending them to `out`. Returns false, leaving `out`
// unspecified, if `symbols` is not valid UTF-8 or holds a code point that is
// not a byte symbol (e.g. an added token's plain text).
bool SymbolsToBytes(std::string_view symbols, std::string* out);

}  // namespace attnscope::tokenizer
