// attnscope: look inside a transformer language model while it reads a prompt.
#include <iostream>
#include <string>
#include <vector>

#include "service/cli/commands.h"

namespace {

constexpr char kHelp[] = R"(Usage: attnscope <command> [options]

Commands:
  tokenize   text -> token ids, token strings and byte offsets
  analyze    run a prompt through the model and report attention sinks,
             hidden-state norms, context health and next-token entropy

Run 'attnscope <command> --help' for the options of a command.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
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
  if (command == "tokenize") return attnscope::cli::RunTokenize(args);
  if (command == "analyze") return attnscope::cli::RunAnalyze(args);
  std::cerr << "attnscope: unknown command '" << command << "'\n\n" << kHelp;
  return attnscope::cli::kExitUsage;
}
