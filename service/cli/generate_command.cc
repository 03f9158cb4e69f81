// attnscope generate: decode new tokens after a prompt and show how sure the
// model was of each one.
#include <iostream>

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/generate_output.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/generation.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] generate [--model DIR|NAME] (--text TEXT | --ids 1,2,3 | --chat FILE) [options]

Generates up to --max-new-tokens tokens after the prompt (greedy unless a
temperature is given) and prints the text and, per new token, its
probability, its next-token entropy (nats and normalized by log V) and the
most likely alternative.

  --model DIR|NAME     model directory (default: the bundled tiny-gpt2); with
                       --server, a model name from 'attnscope models'
  --text TEXT          the prompt as text (special tokens added as Hugging
                       Face does by default; --no-special-tokens: none)
  --ids 1,2,3          the prompt as token ids
  --chat FILE          a conversation, JSON [{"role": ..., "content": ...}],
                       rendered with the model's chat template
  --add-generation-prompt  with --chat: end with the assistant's header
  --max-new-tokens N   at most N new tokens (default 16)
  --temperature X      0 = greedy (default); otherwise sample at X
  --top-k N            keep the N most likely tokens (default 0: all)
  --top-p X            keep the smallest set with mass >= X (default 0: all)
  --seed N             random seed for sampling (default 0)
  --alternatives N     top alternatives reported per token, 0..20 (default 5)
  --sink-scores        also report A[l,h,pos,0] of every new token
  --ignore-eos         do not stop at the end-of-text token
  --json               machine-readable output
  --threads N          intra-op threads (local only; default: all cores)
)";

struct GenerateArgs {
  Flags flags;
  engine::GenerationSettings settings;
};

absl::StatusOr<GenerateArgs> ParseArgs(const std::vector<std::string>& args) {
  GenerateArgs a;
  ATTNSCOPE_ASSIGN_OR_RETURN(
      a.flags, Flags::Parse(args, WithPromptFlags({{"model"}, {"max-new-tokens"},
                                                   {"temperature"}, {"top-k"}, {"top-p"},
                                                   {"seed"}, {"alternatives"},
                                                   {"sink-scores", false}, {"ignore-eos", false},
                                                   {"json", false}, {"threads"}})));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  engine::GenerationSettings& s = a.settings;
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t max_new, a.flags.GetInt("max-new-tokens", 16, 1, 1 << 20));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.sampling.temperature, a.flags.GetDouble("temperature", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t top_k, a.flags.GetInt("top-k", 0, 0, 1 << 30));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.sampling.top_p, a.flags.GetDouble("top-p", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t seed, a.flags.GetInt("seed", 0, 0, INT64_MAX));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t alternatives, a.flags.GetInt("alternatives", 5, 0, 20));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 0, 1024).status());
  s.max_new_tokens = static_cast<int>(max_new);
  s.sampling.top_k = static_cast<int>(top_k);
  s.sampling.seed = static_cast<uint64_t>(seed);
  s.num_alternatives = static_cast<int>(alternatives);
  s.layer_sink_scores = a.flags.Has("sink-scores");
  s.stop_at_eos = !a.flags.Has("ignore-eos");
  return a;
}

void Print(const GenerateArgs& a, const engine::Prompt& prompt,
           const engine::GenerationResult& result, double tokens_per_second) {
  if (a.flags.Has("json")) {
    std::cout << GenerationJson(prompt, result, tokens_per_second).dump() << "\n";
  } else {
    std::cout << GenerationTable(result);
  }
}

int RunLocal(const GenerateArgs& a) {
  auto bundle = LoadModelFromFlags(a.flags);
  if (!bundle.ok()) return RuntimeError("generate", bundle.status());
  auto prompt = PromptFromFlags(**bundle, a.flags);
  if (!prompt.ok()) return RuntimeError("generate", prompt.status());
  auto result = engine::Generate(**bundle, *prompt, a.settings);
  if (!result.ok()) return RuntimeError("generate", result.status());
  const double seconds = result->prefill_seconds + result->decode_seconds;
  Print(a, *prompt, *result,
        seconds > 0 ? static_cast<double>(result->tokens.size()) / seconds : 0.0);
  return kExitOk;
}

int RunRemote(const GenerateArgs& a, const std::string& server) {
  if (absl::Status s = RejectLocalOnlyFlags(a.flags, {"threads"}); !s.ok()) {
    return UsageError("generate", s);
  }
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return UsageError("generate", prompt.status());
  rpc::RemoteClient client(server);
  auto remote = client.Generate(RemoteModelName(a.flags), *prompt, a.settings);
  if (!remote.ok()) return RuntimeError("generate", remote.status());
  Print(a, remote->prompt, remote->result, remote->tokens_per_second);
  return kExitOk;
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto parsed = ParseArgs(args);
  if (!parsed.ok()) return UsageError("generate", parsed.status());
  return server.empty() ? RunLocal(*parsed) : RunRemote(*parsed, server);
}

}  // namespace attnscope::cli
