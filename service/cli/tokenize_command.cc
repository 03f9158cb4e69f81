// attnscope tokenize: text (or a conversation) -> token ids (and strings and
// byte offsets).
#include <iostream>

#include "nlohmann/json.hpp"
#include "service/cli/command_support.h"
#include "service/cli/batch_output.h"
#include "service/cli/commands.h"
#include "service/cli/prompt_lines.h"
#include "service/cli/remote_support.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] tokenize [--model DIR|NAME] (--text TEXT | --text-file FILE | --chat FILE | --input FILE) [options]

Tokenizes TEXT with the tokenizer of DIR: tokenizer.json (Hugging Face's
format), else vocab.json + merges.txt (GPT-2), else tokenizer.model
(SentencePiece). DIR needs no weights: a folder of tokenizer files will do.

  --model DIR|NAME         directory (default: the bundled tiny-gpt2); with
                           --server, a model name from 'attnscope models'
                           (default: the server's default model); the
                           output is the same
  --text TEXT              the text to tokenize (UTF-8; - reads stdin); the
                           tokenizer's special tokens are added as Hugging Face
                           does by default (Llama's BOS; nothing for GPT-2)
  --text-file FILE         the text from a file (any UTF-8, NUL included)
  --no-special-tokens      with a text: add no special tokens
  --chat FILE              a conversation, JSON [{"role": ..., "content": ...}],
                           rendered with DIR's chat template (tokenizer_config.json
                           or chat_template.jinja) exactly as Hugging Face's
                           apply_chat_template; prints the text, then the ids
  --add-generation-prompt  with --chat: end with the assistant's header
  --input FILE             many prompts, one per line, in the format of
                           'attnscope batch' (JSONL {"id", "text"|"messages"|
                           "ids"} or plain text): prints one JSON line per
                           prompt, {"id", "ids", "tokens", "offsets"} (and
                           "text" for "messages"), or {"id", "line", "error"}
                           for a line that failed (exit 1; the rest go on)
  --format F               with --input: auto (default), jsonl or text
  --json                   print {"ids":[...],"tokens":[...],"offsets":[[b,e],...]}
                           (tokens as Hugging Face spells them, offsets in
                           bytes of the text; with --chat also "text")
  --deadline S             with --server: give up after S seconds
Without --json, prints the ids separated by spaces.
)";

// Keys in the documented order: ids, tokens, offsets (text for a chat).
void AddTokens(const engine::Prompt& prompt, bool chat, nlohmann::ordered_json& out) {
  out["ids"] = prompt.ids;
  out["tokens"] = prompt.tokens;
  out["offsets"] = nlohmann::ordered_json::array();
  for (const auto& [begin, end] : prompt.offsets) out["offsets"].push_back({begin, end});
  if (chat) out["text"] = prompt.text;
}

void PrintTokens(const engine::Prompt& prompt, const Flags& flags) {
  if (!flags.Has("json")) {
    if (flags.Has("chat")) std::cout << prompt.text << "\n";
    for (size_t i = 0; i < prompt.ids.size(); ++i) std::cout << (i ? " " : "") << prompt.ids[i];
    std::cout << "\n";
    return;
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  AddTokens(prompt, flags.Has("chat"), out);
  std::cout << out.dump() << "\n";
}

// One output line of --input: the item's tokens, or why it has none.
nlohmann::ordered_json TokensLine(const BatchItem& item,
                                  const absl::StatusOr<engine::Prompt>& prompt) {
  if (!prompt.ok()) return BatchErrorLine(item.id, item.line, std::string(prompt.status().message()));
  nlohmann::ordered_json out = {{"id", item.id}};
  AddTokens(*prompt, item.prompt.chat.has_value(), out);
  return out;
}

// tokenize --input FILE, here or on a server. An "ids" line is an error
// line, as --ids is a usage error: there is no text to tokenize.
int RunInputFile(const Flags& flags, const std::string& server, double deadline) {
  auto items = ReadInputFile(flags);
  if (!items.ok()) return RuntimeError("tokenize", items.status());
  for (BatchItem& item : *items) {
    if (item.error.empty() && !item.prompt.text && !item.prompt.chat) {
      item.error = "an \"ids\" line has nothing to tokenize: give \"text\" or \"messages\"";
    }
  }
  if (!server.empty()) {
    rpc::RemoteClient client(server, RemoteSecurity());
    client.SetCallOptions(RemoteCallOptions("tokenize", server, deadline));
    const std::string model = RemoteModelName(flags);
    return PrintInputLines(*items, [&](const BatchItem& item) {
      auto prompt = client.Tokenize(model, item.prompt);
      if (!prompt.ok()) {
        return BatchErrorLine(item.id, item.line,
                              std::string(ExplainDeadline(prompt.status(), deadline).message()));
      }
      return TokensLine(item, prompt);
    });
  }
  auto bundle = engine::LoadTokenizerBundle(flags.Get("model", engine::DefaultModelDirectory()));
  if (!bundle.ok()) return RuntimeError("tokenize", bundle.status());
  return PrintInputLines(*items, [&](const BatchItem& item) {
    return TokensLine(item, PromptFromSpec(**bundle, item.prompt));
  });
}

// The server's tokenizer of --model NAME; the same output.
int RunRemote(const Flags& flags, const std::string& server, double deadline) {
  auto spec = PromptSpecFromFlags(flags);
  if (!spec.ok()) return RuntimeError("tokenize", spec.status());
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("tokenize", server, deadline));
  auto prompt = client.Tokenize(RemoteModelName(flags), *spec);
  if (!prompt.ok()) return RuntimeError("tokenize", ExplainDeadline(prompt.status(), deadline));
  PrintTokens(*prompt, flags);
  return kExitOk;
}

}  // namespace

int RunTokenize(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  std::vector<FlagSpec> specs = WithPromptFlags({{"model"}, {"json", false}, {"deadline"}});
  for (FlagSpec& spec : InputFileFlagSpecs()) specs.push_back(std::move(spec));
  auto flags = Flags::Parse(args, specs);
  if (!flags.ok()) return UsageError("tokenize", flags.status());
  if (absl::Status usage = CheckInputFileFlags(*flags, {}); !usage.ok()) {
    return UsageError("tokenize", usage);
  }
  if (flags->Has("ids") || flags->Has("ids-file")) {
    return UsageError("tokenize", absl::InvalidArgumentError(
                                      "--ids: give --text, --text-file or --chat"));
  }
  if (!HasInputFile(*flags)) {
    if (absl::Status usage = CheckPromptFlags(*flags); !usage.ok()) return UsageError("tokenize", usage);
  }
  auto deadline = ParseDeadline(*flags);
  if (!deadline.ok()) return UsageError("tokenize", deadline.status());
  if (flags->Has("deadline") && server.empty()) {
    return UsageError("tokenize", absl::InvalidArgumentError(
                                      "--deadline applies with --server only (tokenizing here "
                                      "does not wait for anything)"));
  }
  if (HasInputFile(*flags)) return RunInputFile(*flags, server, *deadline);
  if (absl::Status read = LoadPromptSources(*flags); !read.ok()) return RuntimeError("tokenize", read);
  if (!server.empty()) return RunRemote(*flags, server, *deadline);
  const std::string dir = flags->Get("model", engine::DefaultModelDirectory());
  // Only the tokenizer (and chat template) are needed: no weights are loaded.
  auto bundle = engine::LoadTokenizerBundle(dir);
  if (!bundle.ok()) return RuntimeError("tokenize", bundle.status());
  auto prompt = PromptFromFlags(**bundle, *flags);
  if (!prompt.ok()) return RuntimeError("tokenize", prompt.status());
  PrintTokens(*prompt, *flags);
  return kExitOk;
}

}  // namespace attnscope::cli
