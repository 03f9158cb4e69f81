// attnscope tokenize: text -> token ids (and strings and byte offsets).
#include <iostream>

#include "nlohmann/json.hpp"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/tokenizer/gpt2_tokenizer.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope tokenize [--model DIR] (--text TEXT | --text-file FILE) [--json]

Tokenizes TEXT with the model's tokenizer (vocab.json + merges.txt in DIR).

  --model DIR        model directory (default: the bundled tiny-gpt2)
  --text TEXT        the text to tokenize (UTF-8); --text - reads stdin
  --text-file FILE   the text from a file (any UTF-8 without NUL bytes)
  --json        print {"ids":[...],"tokens":[...],"offsets":[[begin,end],...]}
                (tokens as Hugging Face spells them, offsets in bytes)
Without --json, prints the ids separated by spaces.
)";

}  // namespace

int RunTokenize(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto flags = Flags::Parse(args, {{"model"}, {"text"}, {"text-file"}, {"json", false}});
  if (!flags.ok()) return UsageError("tokenize", flags.status());
  if (flags->Has("text") == flags->Has("text-file")) {
    return UsageError("tokenize", absl::InvalidArgumentError(
                                      "give exactly one of --text TEXT (- for stdin) or --text-file FILE"));
  }
  if (absl::Status usage = CheckPromptFlags(*flags); !usage.ok()) return UsageError("tokenize", usage);
  if (absl::Status read = LoadPromptSources(*flags); !read.ok()) return RuntimeError("tokenize", read);
  const std::string dir = flags->Get("model", engine::DefaultModelDirectory());
  // Only the tokenizer is needed: no weights are loaded.
  auto tok = tokenizer::Gpt2Tokenizer::Load(dir);
  if (!tok.ok()) return RuntimeError("tokenize", tok.status());
  auto enc = (*tok)->Encode(flags->Get("text"));
  if (!enc.ok()) return RuntimeError("tokenize", enc.status());
  if (!flags->Has("json")) {
    for (size_t i = 0; i < enc->ids.size(); ++i) std::cout << (i ? " " : "") << enc->ids[i];
    std::cout << "\n";
    return kExitOk;
  }
  // Keys in the documented order: ids, tokens, offsets.
  nlohmann::ordered_json out = {{"ids", enc->ids},
                                {"tokens", nlohmann::ordered_json::array()},
                                {"offsets", nlohmann::ordered_json::array()}};
  for (size_t i = 0; i < enc->ids.size(); ++i) {
    out["tokens"].push_back((*tok)->TokenString(enc->ids[i]).value_or("?"));
    out["offsets"].push_back({enc->offsets[i].first, enc->offsets[i].second});
  }
  std::cout << out.dump() << "\n";
  return kExitOk;
}

}  // namespace attnscope::cli
