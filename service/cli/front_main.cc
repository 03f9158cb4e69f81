// attnscope: the command-line tool's front. It answers what needs no model
// runtime itself (--version, and `models` of a local directory, which reads
// config.json, the checkpoint's headers and the tokenizer), and runs
// attnscope-engine, installed beside it, for everything else, with the same
// arguments. The front links neither libtorch nor gRPC: a process that
// loads libtorch spends a noticeable time starting before main, which these
// commands need not pay.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "attnscope_version.h"
#include "service/cli/flags.h"
#include "service/cli/model_listing.h"

namespace {

// Replaces this process with attnscope-engine (the directory of this
// binary) on the same arguments; returns only on failure.
int RunEngine(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string engine =
      ((error ? std::filesystem::path(argv[0]) : self).parent_path() / "attnscope-engine").string();
  argv[0] = const_cast<char*>(engine.c_str());
  execv(engine.c_str(), argv);
  std::fprintf(stderr, "attnscope: cannot run %s: %s (attnscope-engine is installed beside attnscope)\n",
               engine.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--version" || args[0] == "version")) {
    std::cout << "attnscope " << attnscope::kAttnscopeVersion << " (git "
              << attnscope::kAttnscopeGitRevision << ")\n";
    return 0;
  }
  // `models` without --server (which would come before the command).
  if (!args.empty() && args[0] == "models" && !attnscope::cli::WantsHelp(args)) {
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    auto flags = attnscope::cli::Flags::Parse(rest, attnscope::cli::ModelsFlagSpecs());
    if (!flags.ok()) {
      std::cerr << "attnscope models: " << flags.status().message() << "\n"
                << "Run 'attnscope models --help' for usage.\n";
      return 2;
    }
    return attnscope::cli::RunLocalModels(*flags);
  }
  return RunEngine(argv);
}
