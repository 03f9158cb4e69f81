// The attnscope subcommands. Each takes the arguments after its name and
// returns the process exit code: 0 success, 2 bad usage, 1 any other error
// (the message on stderr).
#pragma once

#include <string>
#include <vector>

namespace attnscope::cli {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// Every command but health also runs against a server: `server` is the
// target of --server (HOST:PORT or a gRPC target URI), "" to run locally.
int RunTokenize(const std::vector<std::string>& args, const std::string& server = "");
int RunAnalyze(const std::vector<std::string>& args, const std::string& server = "");
int RunGenerate(const std::vector<std::string>& args, const std::string& server = "");
int RunModels(const std::vector<std::string>& args, const std::string& server = "");
// health needs a server: a grpc.health.v1 check (exit 0 only when SERVING).
int RunHealth(const std::vector<std::string>& args, const std::string& server);
int RunHeads(const std::vector<std::string>& args, const std::string& server = "");
int RunAblate(const std::vector<std::string>& args, const std::string& server = "");
// batch: every prompt of a JSONL (or text) file, one result line each.
int RunBatch(const std::vector<std::string>& args, const std::string& server = "");
// summarize: population figures of batch results (no model, no server).
int RunSummarize(const std::vector<std::string>& args);
// stream-ppl: perplexity of a text under KV-cache eviction policies (local).
int RunStreamPpl(const std::vector<std::string>& args);
// lens: the logit lens of a prompt and, with --rollout, its attention
// rollout (on `server`'s Lens RPC when not empty).
int RunLens(const std::vector<std::string>& args, const std::string& server = "");
// dla: direct logit attribution of a prompt's prediction (Lens RPC too).
int RunDla(const std::vector<std::string>& args, const std::string& server = "");
// patch: activation patching of a clean and a corrupted prompt (Patch RPC).
int RunPatch(const std::vector<std::string>& args, const std::string& server = "");

}  // namespace attnscope::cli
