// attnscope: look inside a transformer language model while it reads a prompt.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "attnscope_version.h"
#include "service/cli/commands.h"
#include "service/cli/remote_support.h"
#include "service/rpc/client_channel.h"

namespace {

constexpr char kHelp[] = R"(Usage: attnscope [--verbose] [--server TARGET] <command> [options]

Commands:
  tokenize   text -> token ids, token strings and byte offsets
  analyze    run a prompt through the model and report attention sinks,
             hidden-state norms, context health and next-token entropy
  generate   decode new tokens and show each one's probability and entropy
  models     list the model (or the server's models)
  heads      scan every head on the induction probe: previous-token,
             induction and sink scores, and the loss on each half
  ablate     switch heads off and measure the loss on each half of the probe
  batch      analyze every prompt of a dataset file (JSONL or text), one
             line of results per prompt, locally or over a server's replicas
  summarize  dataset figures of batch results: Sink-ε, per-head first-token
             importance, health and entropy distributions; text, JSON, HTML
  stream-ppl perplexity of a text read token by token under KV-cache
             eviction policies (StreamingLLM: full, sinks, window, ...)
  lens       the logit lens: every hidden state read out through the final
             norm and head (top token, the next token's probability and
             rank); --rollout adds the attention rollout
  dla        direct logit attribution: each head's, MLP's and the
             embedding's direct contribution to a target token's logit
  patch      activation patching: how much of a clean prompt's answer each
             head (or residual position) restores in a corrupted prompt
  health     ask a server's gRPC health service whether it serves (--server)

With --server TARGET, every command but summarize and stream-ppl (tokenize,
analyze with --export and --viewer, generate, models, heads, ablate, batch,
lens, dla, patch)
runs on a running attnscope-server instead of loading a model here; the output is the same.
TARGET is HOST:PORT or a gRPC target URI naming several replicas, e.g.
dns:///attnscope.example:50051 or ipv4:10.0.0.1:50051,10.0.0.2:50051;
requests go round robin over every address (gRPC's round_robin policy).

--verbose (before the command) also prints gRPC's own log lines: connection,
resolver and TLS handshake details the error message sums up.

Connection options, after --server TARGET and before the command:
  --tls-ca FILE          connect over TLS, trusting the PEM CA in FILE
  --tls-cert FILE        a PEM client certificate, for servers that require
  --tls-key FILE         one (attnscope-server --tls-client-ca), and its key
  --auth-token-file FILE send the token on FILE's first line as
                         "authorization: Bearer <token>"; without this flag
                         the token in $ATTNSCOPE_TOKEN, if set, is sent

Run 'attnscope <command> --help' for the options of a command, and
'attnscope --version' for the version and git revision.
)";

// Takes a leading "--server TARGET" (or "--server=TARGET") off `args`.
// False (with a message) when the address is missing.
bool TakeServer(std::vector<std::string>& args, std::string* server) {
  if (args.empty()) return true;
  const std::string& first = args.front();
  if (first.rfind("--server=", 0) == 0) {
    *server = first.substr(9);
    args.erase(args.begin());
  } else if (first == "--server") {
    if (args.size() < 2) {
      std::cerr << "attnscope: --server needs HOST:PORT or a gRPC target URI\n";
      return false;
    }
    *server = args[1];
    args.erase(args.begin(), args.begin() + 2);
  } else {
    return true;
  }
  if (server->empty()) std::cerr << "attnscope: --server needs HOST:PORT or a gRPC target URI\n";
  return !server->empty();
}

// Takes a "--verbose" at the front of `args`.
bool TakeVerbose(std::vector<std::string>& args) {
  if (args.empty() || args.front() != "--verbose") return false;
  args.erase(args.begin());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string server;
  bool verbose = TakeVerbose(args);
  if (!TakeServer(args, &server)) return attnscope::cli::kExitUsage;
  verbose = TakeVerbose(args) || verbose;
  if (!verbose) attnscope::rpc::QuietGrpcLogs();
  if (!server.empty()) {
    if (absl::Status target = attnscope::rpc::CheckTarget(server); !target.ok()) {
      std::cerr << "attnscope: --server " << target.message() << "\n";
      return attnscope::cli::kExitUsage;
    }
  }
  attnscope::rpc::ClientSecurity security;
  if (absl::Status taken = attnscope::cli::TakeConnectionFlags(args, !server.empty(), &security);
      !taken.ok()) {
    std::cerr << "attnscope: " << taken.message() << "\n";
    return attnscope::cli::kExitUsage;
  }
  attnscope::cli::SetRemoteSecurity(std::move(security));
  if (args.empty()) {
    std::cerr << kHelp;
    return attnscope::cli::kExitUsage;
  }
  const std::string command = args.front();
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kHelp;
    return attnscope::cli::kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::cout << "attnscope " << attnscope::kAttnscopeVersion << " (git "
              << attnscope::kAttnscopeGitRevision << ")\n";
    return attnscope::cli::kExitOk;
  }
  if (command == "analyze") return attnscope::cli::RunAnalyze(args, server);
  if (command == "generate") return attnscope::cli::RunGenerate(args, server);
  if (command == "models") return attnscope::cli::RunModels(args, server);
  if (command == "health") return attnscope::cli::RunHealth(args, server);
  if (command == "tokenize") return attnscope::cli::RunTokenize(args, server);
  if (command == "heads") return attnscope::cli::RunHeads(args, server);
  if (command == "ablate") return attnscope::cli::RunAblate(args, server);
  if (command == "batch") return attnscope::cli::RunBatch(args, server);
  if (command == "summarize") {
    if (!server.empty()) {
      std::cerr << "attnscope: summarize reads result files; run it without --server\n";
      return attnscope::cli::kExitUsage;
    }
    return attnscope::cli::RunSummarize(args);
  }
  if (command == "stream-ppl") {
    if (!server.empty()) {
      std::cerr << "attnscope: stream-ppl runs locally; run it without --server\n";
      return attnscope::cli::kExitUsage;
    }
    return attnscope::cli::RunStreamPpl(args);
  }
  if (command == "patch") return attnscope::cli::RunPatch(args, server);
  if (command == "dla") return attnscope::cli::RunDla(args, server);
  if (command == "lens") return attnscope::cli::RunLens(args, server);
  std::cerr << "attnscope: unknown command '" << command << "'\n\n" << kHelp;
  return attnscope::cli::kExitUsage;
}
