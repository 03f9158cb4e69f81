#include "service/cli/command_support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/engine/tensor_pieces.h"
#include "service/chat_template/chat_template.h"
#include "service/cli/remote_support.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/model/language_model.h"

namespace attnscope::cli {
namespace {

// The bytes of FILE, or of stdin for "-"; `what` names it in errors, and
// `content` is what the prompt needs from it ("text", "token ids").
absl::StatusOr<std::string> ReadSource(const std::string& path, const std::string& what,
                                       const std::string& content) {
  std::string bytes;
  if (path == "-") {
    bytes.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return absl::InvalidArgumentError(what + ": cannot read stdin");
  } else {
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": '", path, "' is a directory; give a file of ", content));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": cannot open '", path, "' (missing or not readable)"));
    }
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
    bytes = s.str();
  }
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty: the prompt needs ", content));
  }
  return bytes;
}

std::string SourceName(const std::string& flag, const std::string& path) {
  return path == "-" ? flag + " - (stdin)" : absl::StrCat(flag, " ", path);
}

}  // namespace

int UsageError(const std::string& command, const absl::Status& status) {
  std::cerr << "attnscope " << command << ": " << status.message() << "\n"
            << "Run 'attnscope " << command << " --help' for usage.\n";
  return 2;
}

absl::Status CheckPageFile(const Flags& flags, const std::string& flag) {
  if (!flags.Has(flag)) return absl::OkStatus();
  const std::filesystem::path page(flags.Get(flag));
  const std::filesystem::path dir = page.has_parent_path() ? page.parent_path() : ".";
  std::error_code ec;
  if (page.empty() || std::filesystem::is_directory(page, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " takes a file name, not the directory '",
                                                   page.string(), "'"));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--", flag, " ", page.string(), ": the directory '",
                                            dir.string(), "' does not exist"));
  }
  return absl::OkStatus();
}

absl::Status WritePage(const Flags& flags, const std::string& flag, const std::string& page) {
  const std::string path = flags.Get(flag);
  std::ofstream out(path, std::ios::binary);
  out << page;
  if (!out.flush()) {
    return absl::InternalError(absl::StrCat("--", flag, " ", path, ": cannot write the file"));
  }
  std::cerr << "wrote " << path << " (" << page.size() / 1024 << " kB)\n";
  return absl::OkStatus();
}

int RuntimeError(const std::string& command, const absl::Status& status) {
  std::cerr << "attnscope " << command << ": " << status.message() << "\n";
  return 1;
}

absl::StatusOr<bool> ParseColorFlag(const Flags& flags) {
  const std::string color = flags.Get("color", "auto");
  if (color != "auto" && color != "always" && color != "never") {
    return absl::InvalidArgumentError("--color must be auto, always or never, got '" + color + "'");
  }
  return color == "always" || (color == "auto" && isatty(STDOUT_FILENO) != 0);
}

absl::StatusOr<std::unique_ptr<engine::ModelBundle>> LoadModelFromFlags(const Flags& flags) {
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0, 1, 1024));
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && threads > static_cast<int64_t>(cores)) {
    std::cerr << "attnscope: warning: --threads " << threads << " is more than the " << cores
              << " cores of this machine; extra threads compete for the same cores and "
                 "usually make it slower\n";
  }
  model::SetComputeThreads(static_cast<int>(threads));
  model::ModelLoadOptions options;
  ATTNSCOPE_ASSIGN_OR_RETURN(options.device, model::ParseDeviceKind(flags.Get("device", "cpu")));
  return engine::LoadModelBundle(flags.Get("model", engine::DefaultModelDirectory()), options);
}

std::vector<FlagSpec> ComputeFlagSpecs() { return {{"precision"}, {"device"}}; }

absl::StatusOr<model::Precision> ParseComputeFlags(const Flags& flags) {
  absl::StatusOr<model::DeviceKind> device = model::ParseDeviceKind(flags.Get("device", "cpu"));
  if (!device.ok()) return absl::InvalidArgumentError(absl::StrCat("--", device.status().message()));
  absl::StatusOr<model::Precision> precision =
      model::ParsePrecision(flags.Get("precision", "float32"));
  if (!precision.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", precision.status().message()));
  }
  return *precision;
}

std::vector<FlagSpec> AnalysisSettingsFlagSpecs() {
  std::vector<FlagSpec> specs = {
      {"threshold"}, {"sink-epsilon"}, {"template"}, {"block-size"}, {"threads"}};
  for (FlagSpec& spec : ComputeFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

absl::StatusOr<engine::AnalysisSettings> ParseAnalysisSettings(const Flags& flags) {
  engine::AnalysisSettings settings;
  ATTNSCOPE_ASSIGN_OR_RETURN(settings.threshold, flags.GetDouble("threshold", 6.0));
  if (!(settings.threshold > 0) || !std::isfinite(settings.threshold)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--threshold must be a positive z-score (default 6.0), got '", flags.Get("threshold"),
        "'"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(settings.sink_epsilon, flags.GetDouble("sink-epsilon", 0.3));
  if (!(settings.sink_epsilon >= 0 && settings.sink_epsilon <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sink-epsilon must be a share of attention in [0, 1] (default 0.3), got '",
        flags.Get("sink-epsilon"), "'"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(settings.structure,
                             analysis::ParseStructure(flags.Get("template", "auto")));
  ATTNSCOPE_ASSIGN_OR_RETURN(settings.query_block_size,
                             flags.GetInt("block-size", 0, 0, int64_t{1} << 30));
  ATTNSCOPE_RETURN_IF_ERROR(flags.GetInt("threads", 0, 1, 1024).status());
  ATTNSCOPE_ASSIGN_OR_RETURN(const model::Precision precision, ParseComputeFlags(flags));
  if (flags.Has("precision")) settings.precision = precision;
  return settings;
}

std::vector<FlagSpec> PromptFlagSpecs() {
  return {{"text"},
          {"text-file"},
          {"ids"},
          {"ids-file"},
          {"chat"},
          {"add-generation-prompt", false},
          {"chat-template-kwargs"},
          {"no-special-tokens", false}};
}

std::vector<FlagSpec> WithPromptFlags(std::vector<FlagSpec> specs) {
  for (FlagSpec& spec : PromptFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

absl::Status CheckPromptFlags(const Flags& flags) {
  int given = 0;
  for (const char* name : {"text", "text-file", "ids", "ids-file", "chat"}) given += flags.Has(name);
  if (given != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --text TEXT (- for stdin), --text-file FILE, --ids 1,2,3, "
        "--ids-file FILE or --chat FILE");
  }
  if (flags.Has("text") && flags.Get("text").empty()) {
    return absl::InvalidArgumentError(
        "--text is empty: give the prompt, or --text - to read it from stdin");
  }
  for (const char* name : {"text-file", "ids-file", "chat"}) {
    if (flags.Has(name) && flags.Get(name).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a file name"));
    }
  }
  for (const char* name : {"add-generation-prompt", "chat-template-kwargs"}) {
    if (flags.Has(name) && !flags.Has("chat")) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs --chat FILE"));
    }
  }
  if (flags.Has("chat-template-kwargs")) {
    ATTNSCOPE_RETURN_IF_ERROR(chat_template::ParseTemplateKwargs(flags.Get("chat-template-kwargs"),
                                                                 "--chat-template-kwargs")
                                  .status());
  }
  if (flags.Has("no-special-tokens") && !flags.Has("text") && !flags.Has("text-file")) {
    return absl::InvalidArgumentError(
        "--no-special-tokens applies to a text prompt only (a chat template writes its own "
        "special tokens; ids are taken as given)");
  }
  if (flags.Has("ids")) return ParseIdList(flags.Get("ids"), "--ids").status();
  return absl::OkStatus();
}

absl::Status LoadPromptSources(Flags& flags) {
  std::string text_path;
  if (flags.Has("text") && flags.Get("text") == "-") text_path = "-";
  if (flags.Has("text-file")) text_path = flags.Get("text-file");
  if (!text_path.empty()) {
    const std::string what = SourceName(flags.Has("text-file") ? "--text-file" : "--text", text_path);
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string text, ReadSource(text_path, what, "text"));
    ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, what));
    flags.Erase("text-file");
    flags.Set("text", std::move(text));
  }
  if (flags.Has("ids-file")) {
    const std::string path = flags.Get("ids-file"), what = SourceName("--ids-file", path);
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string bytes, ReadSource(path, what, "token ids"));
    ATTNSCOPE_RETURN_IF_ERROR(ParseIdList(bytes, what).status());
    flags.Erase("ids-file");
    flags.Set("ids", std::move(bytes));
  }
  return absl::OkStatus();
}

absl::Status ChatFromFlags(const Flags& flags, rpc::PromptSpec* spec) {
  const std::string path = flags.Get("chat");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--chat ", path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  ATTNSCOPE_ASSIGN_OR_RETURN(spec->chat, chat_template::ParseMessages(text.str(), path));
  // The file's own variables ({"messages": [...], "chat_template_kwargs": ...}),
  // then the flag's over them.
  nlohmann::json file;
  try {
    file = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception&) {
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(spec->chat_kwargs, chat_template::ConversationKwargs(file, path));
  if (flags.Has("chat-template-kwargs")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        const nlohmann::json kwargs,
        chat_template::ParseTemplateKwargs(flags.Get("chat-template-kwargs"), "--chat-template-kwargs"));
    for (const auto& [key, value] : kwargs.items()) spec->chat_kwargs[key] = value;
  }
  spec->add_generation_prompt = flags.Has("add-generation-prompt");
  return absl::OkStatus();
}

absl::StatusOr<engine::Prompt> PromptFromSpec(const engine::ModelBundle& bundle,
                                              const rpc::PromptSpec& spec) {
  if (spec.text.has_value()) {
    return engine::PromptFromText(bundle, *spec.text, spec.add_special_tokens.value_or(true));
  }
  if (spec.chat.has_value()) {
    return engine::PromptFromChat(bundle, *spec.chat, spec.add_generation_prompt, spec.chat_kwargs);
  }
  return engine::PromptFromIds(bundle, spec.ids);
}

absl::StatusOr<engine::Prompt> PromptFromFlags(const engine::ModelBundle& bundle,
                                               const Flags& flags) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const rpc::PromptSpec spec, PromptSpecFromFlags(flags));
  return PromptFromSpec(bundle, spec);
}

}  // namespace attnscope::cli
