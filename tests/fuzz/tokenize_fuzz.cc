// Fuzz target: encode and decode arbitrary bytes with real tokenizers loaded
// once: GPT-2's vocab.json + merges.txt (models/tiny-gpt2), Llama 3's
// tokenizer.json (byte-level BPE, special tokens) and Llama 2's (Metaspace,
// byte fallback, a Prepend normalizer). Invalid UTF-8 must be refused; valid
// text must give ids within the vocabulary and spans within the text, and the
// byte-level tokenizers must give the text back exactly when decoding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "service/core/utf8.h"
#include "service/tokenizer/gpt2_tokenizer.h"
#include "service/tokenizer/hf_tokenizer.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/tokenizer_checks.h"

namespace {

using attnscope::tokenizer::Tokenizer;

struct Tokenizers {
  std::unique_ptr<Tokenizer> gpt2;
  std::unique_ptr<Tokenizer> llama3;
  std::unique_ptr<Tokenizer> llama2;
};

template <typename T>
std::unique_ptr<Tokenizer> LoadOrDie(absl::StatusOr<std::unique_ptr<T>> loaded) {
  FUZZ_CHECK(loaded.ok(), loaded.status().ToString());
  return std::move(loaded).value();
}

const Tokenizers* g_tokenizers = nullptr;

// Kept for the life of the process.
Tokenizers* LoadAll() {
  namespace tok = attnscope::tokenizer;
  const std::string data = attnscope::fuzz::TestDataDir() + "/tokenizers/";
  auto* t = new Tokenizers;
  t->gpt2 = LoadOrDie(tok::Gpt2Tokenizer::Load(attnscope::fuzz::ModelsDir() + "/tiny-gpt2"));
  t->llama3 = LoadOrDie(tok::HfTokenizer::Load(data + "llama3/tokenizer.json"));
  t->llama2 = LoadOrDie(tok::HfTokenizer::Load(data + "llama2/tokenizer.json"));
  return t;
}

// Encodes `text`; InvalidArgument exactly when it is not valid UTF-8.
void EncodeAndCheck(const Tokenizer& tok, std::string_view text, bool exact_round_trip) {
  const bool valid = attnscope::ValidateUtf8(text, "text").ok();
  auto encoding = tok.Encode(text);
  if (!encoding.ok()) {
    FUZZ_CHECK(!valid && absl::IsInvalidArgument(encoding.status()), encoding.status().ToString());
    return;
  }
  FUZZ_CHECK(valid, "invalid UTF-8 was encoded");
  const std::string decoded = attnscope::fuzz::CheckEncoding(tok, text, *encoding);
  if (exact_round_trip) FUZZ_CHECK(decoded == text, decoded);
  attnscope::fuzz::CheckEncoding(tok, text, tok.AddSpecialTokens(*encoding));
}

}  // namespace

// Loading Llama 3's 9 MB tokenizer.json takes seconds under ASan: done before
// fuzzing, so that it never counts against the first input's time limit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tokenizers = LoadAll();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizers& t = *g_tokenizers;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  EncodeAndCheck(*t.gpt2, text, /*exact_round_trip=*/true);
  EncodeAndCheck(*t.llama3, text, /*exact_round_trip=*/true);
  EncodeAndCheck(*t.llama2, text, /*exact_round_trip=*/false);
  attnscope::fuzz::DecodeArbitraryIds(*t.gpt2, text);
  attnscope::fuzz::DecodeArbitraryIds(*t.llama3, text);
  attnscope::fuzz::DecodeArbitraryIds(*t.llama2, text);
  return 0;
}
