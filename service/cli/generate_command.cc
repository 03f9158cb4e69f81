// attnscope generate: decode new tokens after a prompt and show how sure the
// model was of each one.
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"

#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/generate_output.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/engine/generation.h"
#include "service/engine/streaming_cache.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--server HOST:PORT] generate [--model DIR|NAME] (--text TEXT | --text-file FILE | --ids 1,2,3 | --ids-file FILE | --chat FILE) [options]

Generates up to --max-new-tokens tokens after the prompt (greedy unless a
temperature is given) and prints the text and, per new token, its
probability, its next-token entropy (nats and normalized by log V) and the
most likely other tokens (the alternatives; never the chosen token itself).

  --model DIR|NAME     model directory (default: the bundled tiny-gpt2); with
                       --server, a model name from 'attnscope models'
  --text TEXT          the prompt as text (- reads it from stdin); special
                       tokens added as Hugging Face does by default
  --text-file FILE     the prompt from a file (any UTF-8, NUL included)
  --no-special-tokens  with a text prompt: add no special tokens
  --ids 1,2,3          the prompt as token ids
  --ids-file FILE      token ids from a file (commas or whitespace; - = stdin)
  --chat FILE          a conversation, JSON [{"role": ..., "content": ...}],
                       rendered with the model's chat template
  --add-generation-prompt  with --chat: end with the assistant's header
  --max-new-tokens N   at most N new tokens (default 16); more than the
                       positions left after the prompt is cut to what fits
                       (with a note on stderr; local only)
  --temperature X      0 = greedy (default); otherwise sample at X (0..100)
  --top-k N            keep the N most likely tokens (default 0: all)
  --top-p X            keep the smallest set with mass >= X, in [0, 1]
                       (default 0: all)
  --seed N             random seed for sampling (default 0)
  --alternatives N     most likely other tokens reported per token, 0..19
                       (default 3 in the table, 5 in --json)
  --sink-scores        also report A[l,h,pos,0] of every new token (a
                       layer x head block per token; [layer][head] in JSON)
  --ignore-eos         do not stop at the end-of-text token
  --cache-policy P     KV-cache eviction (see 'attnscope stream-ppl --help'):
                       full (default), sinks:S+R, window:R, detected:K+R,
                       heavy:K+R; --json then gives each token's cache_tokens
                       and evicted_positions
  --cache-positions cache|original
                       positions under a bounded policy (default: cache for
                       rotary models, original for learned positions); with
                       cache, generation may run past the model's positions
  --json               machine-readable output
  --color WHEN         auto (default: on a terminal), always or never: unlikely
                       choices (probability < 0.1) and sink scores >= 0.5 in
                       colour
  --threads N          intra-op threads (local only; default: all cores)
  --precision P        float32 (default), bf16 (matrix products on
                       bfloat16 operands) or auto (the checkpoint's dtype);
                       with --server: the server's --precision unless given
  --device D           cpu (default), cuda or auto; local only
  --deadline S         give up after S seconds (with --server the server
                       stops too); with --server, a line on stderr says when
                       the server has not answered within a second (queued)
)";

struct GenerateArgs {
  Flags flags;
  engine::GenerationSettings settings;
  int alternatives = 0;  // shown per token (the engine is asked for one more)
  bool color = false;
  double deadline = 0;   // seconds; 0: none
};

// What the sampling flags allow, checked before anything runs (usage errors).
absl::Status CheckSampling(const engine::SamplingSettings& s) {
  if (!(s.temperature >= 0.0 && s.temperature <= 100.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--temperature must be in [0, 100] (0: greedy), got ", s.temperature));
  }
  if (!(s.top_p >= 0.0 && s.top_p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--top-p must be in [0, 1] (0 or 1: no cut), got ", s.top_p));
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateArgs> ParseArgs(const std::vector<std::string>& args) {
  GenerateArgs a;
  ATTNSCOPE_ASSIGN_OR_RETURN(
      a.flags, Flags::Parse(args, WithPromptFlags({{"model"}, {"max-new-tokens"},
                                                   {"temperature"}, {"top-k"}, {"top-p"},
                                                   {"seed"}, {"alternatives"},
                                                   {"sink-scores", false}, {"ignore-eos", false},
                                                   {"json", false}, {"threads"}, {"deadline"},
                                                   {"precision"}, {"device"}, {"cache-policy"},
                                                   {"cache-positions"}, {"color"}})));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  engine::GenerationSettings& s = a.settings;
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t max_new, a.flags.GetInt("max-new-tokens", 16, 1, 1 << 20));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.sampling.temperature, a.flags.GetDouble("temperature", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t top_k, a.flags.GetInt("top-k", 0, 0, 1 << 30));
  ATTNSCOPE_ASSIGN_OR_RETURN(s.sampling.top_p, a.flags.GetDouble("top-p", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t seed, a.flags.GetInt("seed", 0, 0, INT64_MAX));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      int64_t alternatives,
      a.flags.GetInt("alternatives", a.flags.Has("json") ? 5 : 3, 0, 19));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(const model::Precision precision, ParseComputeFlags(a.flags));
  if (a.flags.Has("precision")) s.precision = precision;
  s.max_new_tokens = static_cast<int>(max_new);
  s.sampling.top_k = static_cast<int>(top_k);
  s.sampling.seed = static_cast<uint64_t>(seed);
  ATTNSCOPE_RETURN_IF_ERROR(CheckSampling(s.sampling));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.color, ParseColorFlag(a.flags));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  s.should_stop = LocalDeadline(a.deadline);
  a.alternatives = static_cast<int>(alternatives);
  // One more than shown: the chosen token is often among the most likely.
  s.num_alternatives = alternatives > 0 ? static_cast<int>(alternatives) + 1 : 0;
  s.layer_sink_scores = a.flags.Has("sink-scores");
  s.stop_at_eos = !a.flags.Has("ignore-eos");
  if (a.flags.Has("cache-policy")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(s.cache_policy,
                               engine::ParseEvictionPolicy(a.flags.Get("cache-policy")));
  }
  if (a.flags.Has("cache-positions")) {
    absl::StatusOr<model::CachePositions> p =
        engine::ParseCachePositions(a.flags.Get("cache-positions"));
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("--cache-", p.status().message()));
    s.cache_positions = *p;
  }
  return a;
}

void Print(const GenerateArgs& a, const engine::Prompt& prompt, engine::GenerationResult result,
           double tokens_per_second, int64_t num_heads) {
  KeepOtherAlternatives(result, a.alternatives);
  if (a.flags.Has("json")) {
    std::cout << GenerationJson(prompt, result, tokens_per_second, num_heads).dump() << "\n";
  } else {
    std::cout << GenerationTable(result, num_heads, a.color);
  }
}

// --max-new-tokens beyond the positions the prompt leaves is cut to fit, with
// a note; a prompt that fills every position is an error.
absl::Status FitMaxNewTokens(const engine::ModelBundle& bundle, const engine::Prompt& prompt,
                             engine::GenerationSettings& s) {
  const int64_t positions = bundle.config().max_positions;
  // A bounded cache with cache positions never runs out of positions.
  if (s.cache_policy.bounded() &&
      s.cache_positions.value_or(engine::DefaultCachePositions(bundle.config())) ==
          model::CachePositions::kCache) {
    return absl::OkStatus();
  }
  const int64_t left = positions - static_cast<int64_t>(prompt.ids.size());
  if (left < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt has ", prompt.ids.size(), " tokens and the model accepts ", positions,
        " positions: no room for a new token; shorten the prompt"));
  }
  if (s.max_new_tokens > left) {
    std::cerr << "attnscope generate: note: --max-new-tokens " << s.max_new_tokens
              << " cut to " << left << " (the prompt has " << prompt.ids.size() << " of the model's "
              << positions << " positions)\n";
    s.max_new_tokens = static_cast<int>(left);
  }
  return absl::OkStatus();
}

int RunLocal(GenerateArgs& a) {
  auto bundle = LoadModelFromFlags(a.flags);
  if (!bundle.ok()) return RuntimeError("generate", bundle.status());
  auto prompt = PromptFromFlags(**bundle, a.flags);
  if (!prompt.ok()) return RuntimeError("generate", prompt.status());
  if (absl::Status fit = FitMaxNewTokens(**bundle, *prompt, a.settings); !fit.ok()) {
    return RuntimeError("generate", fit);
  }
  auto result = engine::Generate(**bundle, *prompt, a.settings);
  if (!result.ok()) return RuntimeError("generate", ExplainDeadline(result.status(), a.deadline));
  const double seconds = result->prefill_seconds + result->decode_seconds;
  Print(a, *prompt, std::move(*result),
        seconds > 0 ? static_cast<double>(result->tokens.size()) / seconds : 0.0,
        (*bundle)->config().num_heads);
  return kExitOk;
}

int RunRemote(const GenerateArgs& a, const std::string& server) {
  if (absl::Status s = RejectLocalOnlyFlags(a.flags, {"threads", "device"}); !s.ok()) {
    return UsageError("generate", s);
  }
  auto prompt = PromptSpecFromFlags(a.flags);
  if (!prompt.ok()) return RuntimeError("generate", prompt.status());
  rpc::RemoteClient client(server, RemoteSecurity());
  client.SetCallOptions(RemoteCallOptions("generate", server, a.deadline));
  auto remote = client.Generate(RemoteModelName(a.flags), *prompt, a.settings);
  if (!remote.ok()) return RuntimeError("generate", ExplainDeadline(remote.status(), a.deadline));
  int64_t num_heads = 0;  // only needed to nest sink scores
  if (a.settings.layer_sink_scores) {
    auto shape = RemoteShape(client, RemoteModelName(a.flags));
    if (!shape.ok()) return RuntimeError("generate", shape.status());
    num_heads = shape->second;
  }
  Print(a, remote->prompt, std::move(remote->result), remote->tokens_per_second, num_heads);
  return kExitOk;
}

}  // namespace

int RunGenerate(const std::vector<std::string>& args, const std::string& server) {
  int exit_code = kExitOk;
  auto parsed = StartCommand("generate", args, kHelp, ParseArgs, &exit_code);
  if (!parsed) return exit_code;
  if (absl::Status read = LoadPromptSources(parsed->flags); !read.ok()) {
    return RuntimeError("generate", read);
  }
  return server.empty() ? RunLocal(*parsed) : RunRemote(*parsed, server);
}

}  // namespace attnscope::cli
