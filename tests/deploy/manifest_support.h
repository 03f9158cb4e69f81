// Helpers of the offline checks of deploy/kubernetes and deploy/compose: YAML
// documents, attnscope-server's flags from its --help, command lines.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "yaml-cpp/yaml.h"

namespace attnscope::deploy::testing {

// Every YAML document of `path` (yaml-cpp throws, with line and column, on a
// syntax error; callers let gtest report it).
std::vector<YAML::Node> LoadDocuments(const std::string& path);

// The flags (without "--") that `attnscope-server --help` lists.
std::set<std::string> ServerFlagNames();

// The number after "(default " in the --help text of flag `name` (its
// description's lines joined); -1 if the text gives no number.
long long ServerFlagDefault(const std::string& name);

// "--name=value" and "--name value" arguments as name -> value ("" for a
// flag with no value); repeated flags keep every value, in order.
std::multimap<std::string, std::string> ParseFlags(const std::vector<std::string>& args);

// The value of flag `name` (the last one if repeated); "" if absent.
std::string FlagValue(const std::multimap<std::string, std::string>& flags,
                      const std::string& name);

// The port of "HOST:PORT"; -1 if there is none.
int PortOf(const std::string& address);

// A YAML sequence of scalars as strings.
std::vector<std::string> Strings(const YAML::Node& sequence);

// A YAML map of scalars as a std::map.
std::map<std::string, std::string> StringMap(const YAML::Node& map);

// The whole file.
std::string Slurp(const std::string& path);

}  // namespace attnscope::deploy::testing
