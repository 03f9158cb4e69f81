// attnscope stream-ppl: the StreamingLLM experiment on the user's own model
// and text. Reads the text one token at a time under each KV-cache eviction
// policy and reports each policy's perplexity and cache size.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/core/status_macros.h"
#include "service/engine/eviction_eval.h"
#include "service/engine/streaming_cache.h"

namespace attnscope::cli {
namespace {

constexpr char kHelp[] = R"(Usage: attnscope stream-ppl [--model DIR] (--text-file FILE | --ids-file FILE) --policy P [--policy P ...] [options]

Reads the text one token at a time with a KV cache, as a streaming
deployment does, and scores every next token: step t feeds x_t and scores
-log p(x_{t+1}). After each step the cache is cut to what the policy keeps.
Prints, per policy, the perplexity exp(mean nll), the steps scored, the
largest cache (tokens, and MiB of keys + values over all layers) and the
speed. Definitions: service/analysis/definitions.md, "KV-cache eviction".

Policies (repeat --policy, or separate them with commas):
  full           keep every token
  sinks:S+R      the first S tokens ever cached + the R most recent
                 (StreamingLLM's StartRecentKVCache)
  window:R       the R most recent (sinks:0+R)
  detected:K+R   the K tokens with the highest mean received attention so
                 far (attnscope's R[j], over the steps each was cached) + R recent
  heavy:K+R      the K tokens with the most attention from the last R
                 queries (H2O-style) + R recent

  --model DIR          model directory (default: the bundled tiny-gpt2)
  --text-file FILE     the text (tokenized with the model's tokenizer, special
                       tokens added as Hugging Face does by default)
  --ids-file FILE      token ids separated by commas or whitespace (- = stdin)
  --text TEXT, --ids 1,2,3, --no-special-tokens   as for analyze
  --positions cache|original
                       cache: keys rotated by their index in the cache
                       (StreamingLLM's position shift; default for rotary
                       models; the text may be longer than the model's
                       positions); original: every token keeps its text
                       position (the only choice for learned positions,
                       GPT-2 and OPT; default there): a text longer than
                       the model's positions + 1 is refused
  --max-tokens N       use only the first N tokens of the text (N >= 2)
  --json               one JSON object per policy, one per line
  --threads N          intra-op threads (default: all cores)
)";

struct StreamArgs {
  Flags flags;
  std::vector<std::string> policies;
  int64_t max_tokens = 0;  // 0: all
};

// Takes every "--policy P" / "--policy=P" out of `args` (Flags refuses a
// flag given twice); commas separate several policies in one value.
absl::StatusOr<std::vector<std::string>> TakePolicies(std::vector<std::string>& args) {
  std::vector<std::string> policies, rest;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--policy") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--policy needs a value");
      value = args[++i];
    } else if (args[i].rfind("--policy=", 0) == 0) {
      value = args[i].substr(9);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    for (absl::string_view p : absl::StrSplit(value, ',')) policies.emplace_back(p);
  }
  args = std::move(rest);
  if (policies.empty()) {
    return absl::InvalidArgumentError("give at least one --policy (e.g. --policy sinks:4+28)");
  }
  return policies;
}

absl::StatusOr<StreamArgs> ParseArgs(std::vector<std::string> args,
                                     engine::EvictionEvalSettings& settings) {
  StreamArgs a;
  ATTNSCOPE_ASSIGN_OR_RETURN(a.policies, TakePolicies(args));
  ATTNSCOPE_ASSIGN_OR_RETURN(
      a.flags, Flags::Parse(args, WithPromptFlags({{"model"}, {"positions"}, {"max-tokens"},
                                                   {"json", false}, {"threads"}})));
  ATTNSCOPE_RETURN_IF_ERROR(CheckPromptFlags(a.flags));
  if (a.flags.Has("chat")) {
    return absl::InvalidArgumentError("--chat: stream-ppl reads a text or ids, not a chat");
  }
  for (const std::string& p : a.policies) {
    ATTNSCOPE_ASSIGN_OR_RETURN(engine::EvictionPolicy policy, engine::ParseEvictionPolicy(p));
    settings.policies.push_back(policy);
  }
  if (static_cast<int>(settings.policies.size()) > engine::kMaxEvalPolicies) {
    return absl::InvalidArgumentError(absl::StrCat("--policy: ", settings.policies.size(),
                                                   " given, at most ", engine::kMaxEvalPolicies));
  }
  if (a.flags.Has("positions")) {
    absl::StatusOr<model::CachePositions> p = engine::ParseCachePositions(a.flags.Get("positions"));
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("--", p.status().message()));
    settings.positions = *p;
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(a.max_tokens, a.flags.GetInt("max-tokens", 0, 2, 1 << 24));
  ATTNSCOPE_RETURN_IF_ERROR(a.flags.GetInt("threads", 0, 1, 1024).status());
  return a;
}

// A one-line bar on stderr, redrawn at most ten times a second.
class ProgressBar {
 public:
  explicit ProgressBar(const std::vector<std::string>& names) : names_(names) {}
  void Update(const engine::EvictionProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (p.steps_done < p.steps_total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * p.steps_done / std::max<int64_t>(1, p.steps_total));
    std::string bar;
    for (int i = 0; i < kWidth; ++i) bar += i < filled ? "█" : "░";
    std::cerr << absl::StrFormat("\r\033[K%d/%d %-14s %s %d/%d  ppl %.3f  %.0f tokens/s",
                                 p.policy_index + 1, names_.size(), names_[p.policy_index], bar,
                                 p.steps_done, p.steps_total, p.running_perplexity,
                                 p.seconds > 0 ? p.steps_done / p.seconds : 0.0);
    if (p.steps_done == p.steps_total && p.policy_index + 1 == static_cast<int>(names_.size())) {
      std::cerr << "\r\033[K";
    }
  }

 private:
  std::vector<std::string> names_;
  std::chrono::steady_clock::time_point last_{};
};

void PrintTable(const std::vector<engine::EvictionRunResult>& runs) {
  std::cout << absl::StrFormat("%-16s %-9s %11s %7s %10s %8s %9s\n", "policy", "positions",
                               "perplexity", "steps", "max cache", "KV MiB", "tokens/s");
  for (const engine::EvictionRunResult& r : runs) {
    std::cout << absl::StrFormat("%-16s %-9s %11.3f %7d %10d %8.3f %9.0f\n", r.policy,
                                 r.positions, r.perplexity, r.steps, r.max_cache_tokens,
                                 r.max_cache_bytes / (1024.0 * 1024.0), r.tokens_per_second);
  }
}

void PrintJson(const std::vector<engine::EvictionRunResult>& runs) {
  for (const engine::EvictionRunResult& r : runs) {
    nlohmann::json j = {{"policy", r.policy},
                        {"positions", r.positions},
                        {"steps", r.steps},
                        {"nll", r.nll},
                        {"perplexity", r.perplexity},
                        {"max_cache_tokens", r.max_cache_tokens},
                        {"max_cache_bytes", r.max_cache_bytes},
                        {"seconds", r.seconds},
                        {"tokens_per_second", r.tokens_per_second}};
    std::cout << j.dump() << "\n";
  }
}

int Run(StreamArgs& a, engine::EvictionEvalSettings& settings) {
  auto bundle = LoadModelFromFlags(a.flags);
  if (!bundle.ok()) return RuntimeError("stream-ppl", bundle.status());
  const model::ModelConfig& config = (*bundle)->config();
  if (!a.flags.Has("positions")) settings.positions = engine::DefaultCachePositions(config);
  if (absl::Status s = engine::CheckCachePositions(config, settings.positions); !s.ok()) {
    return UsageError("stream-ppl", absl::InvalidArgumentError(absl::StrCat("--", s.message())));
  }
  auto prompt = PromptFromFlags(**bundle, a.flags);
  if (!prompt.ok()) return RuntimeError("stream-ppl", prompt.status());
  std::vector<int64_t> ids = prompt->ids;
  if (a.max_tokens > 0 && static_cast<int64_t>(ids.size()) > a.max_tokens) ids.resize(a.max_tokens);
  std::vector<std::string> names;
  for (const engine::EvictionPolicy& p : settings.policies) names.push_back(PolicyName(p));
  ProgressBar bar(names);
  const bool terminal = isatty(STDERR_FILENO) != 0;
  auto runs = engine::EvaluateEviction(**bundle, ids, settings, [&](const engine::EvictionProgress& p) {
    if (terminal) bar.Update(p);
  });
  if (!runs.ok()) return RuntimeError("stream-ppl", runs.status());
  if (a.flags.Has("json")) {
    PrintJson(*runs);
  } else {
    PrintTable(*runs);
  }
  return kExitOk;
}

}  // namespace

int RunStreamPpl(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  engine::EvictionEvalSettings settings;
  auto parsed = ParseArgs(args, settings);
  if (!parsed.ok()) return UsageError("stream-ppl", parsed.status());
  if (absl::Status read = LoadPromptSources(parsed->flags); !read.ok()) {
    return RuntimeError("stream-ppl", read);
  }
  return Run(*parsed, settings);
}

}  // namespace attnscope::cli
