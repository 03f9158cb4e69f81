// Text <-> token ids, with the byte span of every token in the input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace attnscope::tokenizer {

struct Encoding {
  std::vector<int64_t> ids;
  // offsets[i] = [begin, end) byte span of token i in the input text. A
  // multi-byte character split across tokens gives each token the bytes it
  // encodes, so spans tile the text exactly, except where a normalizer
  // rewrote the text (NFC, Llama 2's prepended "▁"): such a token spans the
  // original bytes it came from, possibly shared with its neighbour. Special
  // tokens added by AddSpecialTokens have empty spans.
  std::vector<std::pair<int64_t, int64_t>> offsets;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // InvalidArgument (naming the byte offset) if `text` is not valid UTF-8.
  virtual absl::StatusOr<Encoding> Encode(std::string_view text) const = 0;

  // Adds what the tokenizer's post-processor adds to a single sequence with
  // Hugging Face's add_special_tokens=True (Llama's BOS; nothing for GPT-2).
  // Added tokens get the empty span at the start (for a prefix) or the end
  // (for a suffix) of the text.
  virtual Encoding AddSpecialTokens(Encoding encoding) const { return encoding; }

  // Concatenated bytes of the tokens; invalid UTF-8 (a character cut between
  // token ranges) replaced by U+FFFD. InvalidArgument for an id outside the
  // vocabulary.
  virtual absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids) const = 0;

  // The raw bytes one token stands for (may be part of a UTF-8 character).
  // InvalidArgument for an id outside the vocabulary.
  virtual absl::StatusOr<std::string> TokenBytes(int64_t id) const = 0;

  // The vocabulary string of a token as Hugging Face's convert_ids_to_tokens
  // returns it (for GPT-2: byte-level symbols, "ĠThe").
  virtual absl::StatusOr<std::string> TokenString(int64_t id) const = 0;

  // True for special tokens (<|endoftext|>, <s>, <|im_start|>, ...).
  virtual bool IsSpecial(int64_t id) const = 0;

  // Number of ids the tokenizer can produce.
  virtual int64_t vocab_size() const = 0;
};

}  // namespace attnscope::tokenizer
