// Fuzz target: tokenizer.json loading (HfTokenizer::Parse: models,
// normalizers, pre-tokenizers, decoders, added tokens, post-processors). A
// file that loads must then encode and decode a few fixed texts within its
// own vocabulary, whatever components it combines.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "service/tokenizer/hf_tokenizer.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/tokenizer_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = attnscope::tokenizer::HfTokenizer::Parse(text, "tokenizer.json");
  if (!tok.ok()) {
    FUZZ_CHECK(tok.status().message().find("tokenizer.json") != std::string::npos,
               tok.status().ToString());
    return 0;
  }
  for (std::string_view sample : {"", "Hello world", "  a\tb\n\nc  ", "ab abc bca",
                                   "caf\xc3\xa9 \xe2\x96\x81x \xf0\x9f\x98\x80 <s></s>"}) {
    auto encoding = (*tok)->Encode(sample);
    FUZZ_CHECK(encoding.ok(), encoding.status().ToString());
    attnscope::fuzz::CheckEncoding(**tok, sample, *encoding);
    attnscope::fuzz::CheckEncoding(**tok, sample, (*tok)->AddSpecialTokens(*encoding));
  }
  attnscope::fuzz::DecodeArbitraryIds(**tok, text.substr(0, 96));
  return 0;
}
