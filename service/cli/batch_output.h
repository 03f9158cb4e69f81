// The results file of `attnscope batch`: one JSON object per line, appended
// and flushed line by line so that a killed run loses nothing that finished
// (docs/datasets.md names every key).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/engine/analysis_run.h"
#include "service/engine/prompt.h"

namespace attnscope::cli {

// The result line of one prompt: id, model, tokens (T), health, sinks,
// expected_sinks, num_candidates, threshold, sink_score and
// first_token_importance ([layer][head]), sink_epsilon, sink_eps,
// back_half_sink_share, massive_ratio, entropy {next_token_mean_nats,
// next_token_max_nats, next_token_mean_normalized, attention_mean_nats},
// surprisal_mean_nats (null when T = 1), forward_seconds, replica (when
// not empty), and with top_k > 0 top_predictions of the last position.
nlohmann::ordered_json BatchResultLine(const nlohmann::json& id, const std::string& model,
                               const engine::Prompt& prompt, const engine::AnalysisRun& run,
                               const std::string& replica, int top_k);

// The line of a prompt that failed: {"id", "line", "error"}.
nlohmann::ordered_json BatchErrorLine(const nlohmann::json& id, int64_t line, const std::string& error);

// The file name of a prompt's export under --export-dir: the id as text (an
// integer's digits, a string's characters) with every byte outside
// [A-Za-z0-9._-], and a leading '.', written %XX, then ".safetensors".
// InvalidArgument for an empty string or a name over 200 bytes.
absl::StatusOr<std::string> ExportFileName(const nlohmann::json& id);

// Appends lines to the results file. Thread-safe.
class BatchWriter {
 public:
  // Opens `path` for appending. With `resume`, the file may exist: the ids
  // (id.dump()) of its lines are read into done_keys(), and a last line cut
  // short by a kill (no newline at its end) is dropped from the file. Without
  // `resume` the file must not exist (AlreadyExists, saying --resume
  // continues it). Errors name the file.
  static absl::StatusOr<std::unique_ptr<BatchWriter>> Open(const std::string& path, bool resume);
  ~BatchWriter();

  // Writes `line` and a newline with one write(2) call.
  absl::Status Write(const nlohmann::ordered_json& line);

  const std::set<std::string>& done_keys() const { return done_keys_; }
  // Bytes of a cut-off last line dropped by Open (0: none).
  int64_t dropped_bytes() const { return dropped_bytes_; }

 private:
  BatchWriter() = default;
  std::string path_;
  int fd_ = -1;
  std::mutex mu_;
  std::set<std::string> done_keys_;
  int64_t dropped_bytes_ = 0;
};

}  // namespace attnscope::cli
