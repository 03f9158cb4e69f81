#include "service/cli/batch_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/stats_json.h"

namespace attnscope::cli {
namespace {

using nlohmann::json;

json Number(double v) { return std::isfinite(v) ? json(v) : json(); }

// Mean of `values` (null when empty).
json Mean(const std::vector<double>& values) {
  if (values.empty()) return json();
  double sum = 0;
  for (double v : values) sum += v;
  return Number(sum / static_cast<double>(values.size()));
}

json Max(const std::vector<double>& values) {
  if (values.empty()) return json();
  double worst = values.front();
  for (double v : values) worst = std::isnan(v) || v > worst ? v : worst;
  return Number(worst);
}

std::vector<double> Flatten(const analysis::HeadGrid& grid) {
  std::vector<double> out;
  for (const auto& row : grid) out.insert(out.end(), row.begin(), row.end());
  return out;
}

json TokenTexts(const engine::Prompt& prompt, const std::vector<int64_t>& positions) {
  json out = json::array();
  for (int64_t p : positions) {
    out.push_back(static_cast<size_t>(p) < prompt.token_bytes.size()
                      ? prompt.Display(static_cast<size_t>(p))
                      : std::string());
  }
  return out;
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::string> ExportFileName(const json& id) {
  const std::string text = id.is_string() ? id.get<std::string>() : id.dump();
  if (text.empty()) {
    return absl::InvalidArgumentError("an empty id cannot name an export file; give the line an id");
  }
  std::string name;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool plain = std::isalnum(c) != 0 || c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain && c < 0x80) {
      name += static_cast<char>(c);
    } else {
      name += absl::StrFormat("%%%02X", c);
    }
  }
  if (name.size() > 200) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the id makes an export file name of ", name.size(),
        " bytes (at most 200, non-ASCII and punctuation count 3 each); give a shorter id"));
  }
  return name + ".safetensors";
}

nlohmann::ordered_json BatchResultLine(const json& id, const std::string& model, const engine::Prompt& prompt,
                     const engine::AnalysisRun& run, const std::string& replica, int top_k) {
  const analysis::PromptStats& s = run.stats;
  // The per-prompt keys take the names and the number format of analyze --json.
  const json all = analysis::StatsToJson(s);
  nlohmann::ordered_json line;
  line["id"] = id;
  line["model"] = model;
  line["tokens"] = s.num_tokens;
  line["template"] = std::string(analysis::StructureName(run.structure));
  for (const char* key : {"health", "sinks", "expected_sinks", "threshold", "sink_score",
                          "first_token_importance", "sink_epsilon", "sink_eps",
                          "back_half_sink_share"}) {
    line[key] = all[key];
  }
  line["sink_tokens"] = TokenTexts(prompt, s.sinks);
  line["num_candidates"] = s.num_candidates;
  line["massive_ratio"] = Number(s.massive_ratio);
  line["entropy"] = {{"next_token_mean_nats", Mean(s.next_token_entropy_nats)},
                     {"next_token_max_nats", Max(s.next_token_entropy_nats)},
                     {"next_token_mean_normalized", Mean(s.next_token_entropy_normalized)},
                     {"attention_mean_nats", Mean(Flatten(s.attention_entropy))}};
  line["surprisal_mean_nats"] = Mean(s.next_token_surprisal_nats);
  line["forward_seconds"] = Number(run.forward_seconds);
  if (!replica.empty()) line["replica"] = replica;
  if (top_k > 0 && !all["top_predictions"].empty()) {
    nlohmann::ordered_json last = all["top_predictions"].back();
    if (last.size() > static_cast<size_t>(top_k)) last.erase(last.begin() + top_k, last.end());
    line["top_predictions"] = std::move(last);
  }
  return line;
}

nlohmann::ordered_json BatchErrorLine(const json& id, int64_t line, const std::string& error) {
  return {{"id", id}, {"line", line}, {"error", error}};
}

absl::StatusOr<std::unique_ptr<BatchWriter>> BatchWriter::Open(const std::string& path,
                                                              bool resume) {
  std::unique_ptr<BatchWriter> w(new BatchWriter());
  w->path_ = path;
  struct stat st;
  const bool exists = stat(path.c_str(), &st) == 0;
  if (exists && !resume) {
    return absl::AlreadyExistsError(absl::StrCat(
        "--output ", path, " exists; --resume continues it (skipping the ids it holds), or give "
        "another file"));
  }
  w->fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return Errno("--output: cannot open", path);
  if (!exists) return w;
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A run killed in the middle of a write leaves a last line without its
  // newline: drop it, that prompt runs again.
  const size_t end = text.empty() ? 0 : text.find_last_of('\n') + 1;
  if (end < text.size()) {
    w->dropped_bytes_ = static_cast<int64_t>(text.size() - end);
    if (ftruncate(w->fd_, static_cast<off_t>(end)) != 0) return Errno("--output: cannot truncate", path);
    text.resize(end);
  }
  size_t begin = 0;
  for (int64_t number = 1; begin < text.size(); ++number) {
    const size_t newline = text.find('\n', begin);
    const json line = json::parse(text.substr(begin, newline - begin), nullptr, false);
    if (!line.is_object() || !line.contains("id")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--output ", path, ": line ", number, " is not a result of attnscope batch (no JSON "
          "object with an \"id\"); --resume appends only to its own output"));
    }
    w->done_keys_.insert(line["id"].dump());
    begin = newline + 1;
  }
  return w;
}

BatchWriter::~BatchWriter() {
  if (fd_ >= 0) close(fd_);
}

absl::Status BatchWriter::Write(const nlohmann::ordered_json& line) {
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("--output: cannot write", path_);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace attnscope::cli
