#include "tests/deploy/manifest_support.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "tests/metrics/metrics_test_support.h"

namespace attnscope::deploy::testing {

std::vector<YAML::Node> LoadDocuments(const std::string& path) {
  return YAML::LoadAllFromFile(path);
}

namespace {

// `attnscope-server --help`, run once (each run loads libtorch: ~1 s).
const metrics::testing::ProcessResult& ServerHelp() {
  static const metrics::testing::ProcessResult help = metrics::testing::RunProcess(
      {std::string(ATTNSCOPE_BIN_DIR) + "/attnscope-server", "--help"}, "");
  return help;
}

}  // namespace

std::set<std::string> ServerFlagNames() {
  const metrics::testing::ProcessResult& help = ServerHelp();
  std::set<std::string> names;
  if (help.exit_code != 0) return names;
  std::istringstream lines(help.output);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, 2, "--") != 0) continue;
    const std::size_t end = line.find_first_of(" =", start);
    names.insert(line.substr(start + 2, end == std::string::npos ? end : end - start - 2));
  }
  return names;
}

long long ServerFlagDefault(const std::string& name) {
  const metrics::testing::ProcessResult& help = ServerHelp();
  if (help.exit_code != 0) return -1;
  // The flag's line and its continuation lines (those not starting a flag).
  std::istringstream lines(help.output);
  std::string text;
  bool inside = false;
  for (std::string line; std::getline(lines, line);) {
    const std::size_t start = line.find_first_not_of(' ');
    const bool flag_line = start != std::string::npos && line.compare(start, 2, "--") == 0;
    if (flag_line) {
      const std::size_t end = line.find_first_of(" =", start);
      inside = line.substr(start + 2, end == std::string::npos ? end : end - start - 2) == name;
    }
    if (inside && start != std::string::npos) text += " " + line.substr(start);
  }
  const std::size_t at = text.find("(default ");
  long long value = -1;
  if (at == std::string::npos) return -1;
  const std::size_t begin = at + 9;
  const std::size_t end = text.find_first_not_of("0123456789", begin);
  if (!absl::SimpleAtoi(text.substr(begin, end - begin), &value)) return -1;
  return value;
}

std::multimap<std::string, std::string> ParseFlags(const std::vector<std::string>& args) {
  std::multimap<std::string, std::string> flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) != 0) continue;
    const std::size_t eq = args[i].find('=');
    if (eq != std::string::npos) {
      flags.emplace(args[i].substr(2, eq - 2), args[i].substr(eq + 1));
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      flags.emplace(args[i].substr(2), args[i + 1]);
      ++i;
    } else {
      flags.emplace(args[i].substr(2), "");
    }
  }
  return flags;
}

std::string FlagValue(const std::multimap<std::string, std::string>& flags,
                      const std::string& name) {
  std::string value;
  const auto [begin, end] = flags.equal_range(name);
  for (auto it = begin; it != end; ++it) value = it->second;
  return value;
}

int PortOf(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return -1;
  }
  return port;
}

std::vector<std::string> Strings(const YAML::Node& sequence) {
  std::vector<std::string> out;
  for (const YAML::Node& item : sequence) out.push_back(item.as<std::string>());
  return out;
}

std::map<std::string, std::string> StringMap(const YAML::Node& map) {
  std::map<std::string, std::string> out;
  for (const auto& entry : map) {
    out[entry.first.as<std::string>()] = entry.second.as<std::string>();
  }
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace attnscope::deploy::testing
