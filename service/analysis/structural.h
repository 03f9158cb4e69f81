// Structural positions: tokens whose identity is fixed by a template, not by
// what was said (service/analysis/definitions.md, "Structural positions"). They are
// reported and left out of the z-score baseline.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace attnscope::analysis {

// The structure a prompt's positions are read with: which tokens are fixed
// by a template rather than said. ("Structure" throughout the C++ code; the
// request's field and the --template flag keep their names. The Jinja chat
// template that renders a conversation is service/chat_template/'s.)
enum class Structure {
  kNone,    // position 0 and special tokens only
  kChatml,  // plus ChatML markers, role names and their newlines
  kAuto,    // kChat for a prompt rendered from a conversation, else kChatml
            // if the text contains "<|im_start|>", else kNone
  kChat,    // plus every token made only of bytes the chat template itself
            // produced (role markers, role names, separators, BOS): any family
};

// Parses the setting string "none", "chatml", "auto" or "chat" (exact, lower case);
// InvalidArgument naming the value and the accepted ones otherwise.
absl::StatusOr<Structure> ParseStructure(std::string_view name);

// "none", "chatml", "auto" or "chat".
std::string_view StructureName(Structure t);

// Structural positions of a prompt, sorted and unique, all in [0, T) with
// T = token_bytes.size():
//  - position 0 (when T >= 1);
//  - every token with is_special[i] true (missing flags count as false, extra
//    flags are ignored);
//  - ChatML: every token overlapping a "<|im_start|>" or "<|im_end|>" marker
//    found in the concatenated token bytes (GPT-2 splits these markers into
//    several ordinary tokens); after an <|im_start|> marker, the role name
//    (the run of up to 8 tokens without whitespace right after the marker:
//    GPT-2 splits "assistant" into "ass" + "istant") and the newline token
//    right after it; the newline token right after an <|im_end|> marker.
//    A newline token is a token made only of whitespace that contains '\n'.
//  - kChat: every token i with from_template[i] true (a prompt rendered
//    from a conversation: the token's bytes all came from the template, none
//    from a message's content). Empty from_template: no such tokens.
// token_bytes[i] are the raw bytes of token i (Tokenizer::TokenBytes).
std::vector<int64_t> StructuralPositions(const std::vector<std::string>& token_bytes,
                                         const std::vector<bool>& is_special, Structure t,
                                         const std::vector<bool>& from_template = {});

// The template kAuto resolves to for these tokens: kChat when `is_chat` (the
// prompt was rendered from a conversation), else by the ChatML markers
// (kNone, kChatml and kChat are returned unchanged).
Structure ResolveStructure(const std::vector<std::string>& token_bytes, Structure t,
                         bool is_chat = false);

}  // namespace attnscope::analysis
