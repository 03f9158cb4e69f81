// Fuzz target: chat-template rendering. An input is a Jinja template, then
// optionally a NUL byte and a conversation as JSON (what --chat files and
// Conversation requests carry), then optionally a NUL byte and one flag byte
// (bit 0: add_generation_prompt). Without a conversation a fixed one is
// rendered. A rendering must mark every output byte as content or not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "service/chat_template/chat_template.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr std::string_view kDefaultConversation =
    R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <s> there"},)"
    R"({"role":"assistant","content":"Hello."},{"role":"user","content":"caf\u00e9?"}])";

// Splits at the first NUL: {before, after}; after is empty without one.
std::pair<std::string_view, std::string_view> SplitAtNul(std::string_view s, bool* found) {
  const size_t nul = s.find('\0');
  *found = nul != std::string_view::npos;
  if (!*found) return {s, {}};
  return {s.substr(0, nul), s.substr(nul + 1)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ct = attnscope::chat_template;
  bool has_messages = false;
  bool has_flags = false;
  auto [source, rest] =
      SplitAtNul(std::string_view(reinterpret_cast<const char*>(data), size), &has_messages);
  auto [messages_json, flags] = SplitAtNul(rest, &has_flags);
  const bool add_generation_prompt = has_flags && !flags.empty() && (flags[0] & 1) != 0;

  auto parsed = ct::ChatTemplate::Parse(source, "fuzz/chat_template.jinja");
  auto messages =
      ct::ParseMessages(has_messages ? messages_json : kDefaultConversation, "fuzz/chat.json");
  if (!parsed.ok() || !messages.ok()) return 0;
  const nlohmann::json variables = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  auto rendered = parsed->Render(*messages, add_generation_prompt, variables);
  if (!rendered.ok()) {
    FUZZ_CHECK(!rendered.status().message().empty(), "an error without a message");
    return 0;
  }
  FUZZ_CHECK(rendered->content.size() == rendered->text.size(), "one content flag per byte");
  return 0;
}
