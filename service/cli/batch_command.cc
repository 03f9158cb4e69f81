// attnscope batch: every prompt of a dataset file through one loaded model
// (or a server's replicas), one JSON line of results per prompt.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "service/cli/batch_input.h"
#include "service/cli/batch_output.h"
#include "service/cli/batch_progress.h"
#include "service/cli/command_support.h"
#include "service/cli/commands.h"
#include "service/cli/remote_support.h"
#include "service/cli/tensor_outputs.h"
#include "service/core/status_macros.h"
#include "service/engine/analysis_run.h"
#include "service/rpc/remote_client.h"

namespace attnscope::cli {
namespace {

using nlohmann::json;

constexpr char kHelp[] = R"(Usage: attnscope [--server TARGET] batch --input PROMPTS --output RESULTS.jsonl [options]

Analyzes every prompt of a dataset file, in one process with one loaded model
(or over a server's replicas with --server), and appends one JSON line of
results per prompt to RESULTS.jsonl (docs/datasets.md names every key).

Input, one prompt per line (blank lines are skipped):
  {"id": "a1", "text": "The cat sat on the mat."}
  {"id": "a2", "messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}
  {"id": "a3", "ids": [464, 3797, 3332]}
or plain text, each line a prompt whose id is its line number. A line
without "id" gets its line number. Ids must be unique.

Output: {"id", "model", "tokens", "health", "sinks", "expected_sinks",
"sink_score" and "first_token_importance" ([layer][head]), "sink_epsilon",
"sink_eps", "entropy" {...}, "replica" (with --server), ...}; a prompt that
failed gives {"id", "line", "error"} and the run goes on.

  --input FILE        the prompts (JSONL or plain text)
  --output FILE       the results, appended and flushed line by line; must
                      not exist unless --resume
  --resume            continue an interrupted run: skip every id already in
                      --output (results and errors) and append the rest
  --format F          auto (default: JSONL when the first line starts with
                      '{'), jsonl or text
  --shard I/N         only the prompts whose position among the input's
                      lines is I modulo N (0 <= I < N): N runs with I = 0..N-1
                      cover every prompt once (deploy/kubernetes/batch)
  --model DIR|NAME    model directory (default: the bundled tiny-gpt2); with
                      --server, a served model's name (default: the server's)
  --concurrency N     with --server: requests in flight (default: 2 per
                      address of an ipv4:/ipv6: list, else 4)
  --retries N         with --server: tries again after UNAVAILABLE or
                      RESOURCE_EXHAUSTED, waiting 0.5 s, 1 s, 2 s ... (at
                      most 10 s) between tries (default 5)
  --sink-epsilon X    Sink-epsilon's cut on the first-token importance, in
                      [0, 1] (default 0.3)
  --top-predictions K also write the K most likely next tokens after each
                      prompt (default 0: none)
  --export-dir DIR    also write each prompt's tensors, as 'analyze --export'
                      does, to DIR/ID.safetensors (the id's characters
                      outside [A-Za-z0-9._-] as %XX; the result line's
                      "export" names the file); DIR is made if missing
  --attention-layers LIST, --attention-heads LIST, --attention-dtype D
                      with --export-dir: as for analyze --export
  --threshold X, --template T, --block-size N, --precision P
                      as for analyze
  --device D, --threads N  as for analyze (local only)
  --deadline S        give up on a prompt after S seconds (an error line)

On a terminal a progress line shows done/total, prompts/s, ETA and errors;
a summary line ends every run on stderr. Exit 0 when every prompt has a
result, 1 when some failed (their error lines are in --output), 2 for bad
usage.
)";

struct BatchArgs {
  Flags flags;
  engine::AnalysisSettings settings;
  TensorOutputFlags exports;  // export_path: the directory (empty: no exports)
  InputFormat format = InputFormat::kAuto;
  Shard shard;
  int concurrency = 1;
  int retries = 5;
  int top_k = 0;
  double deadline = 0;
};

// 2 per address of an ipv4:/ipv6: list (one computing, one queued), else 4.
int DefaultConcurrency(const std::string& server) {
  if (server.rfind("ipv4:", 0) != 0 && server.rfind("ipv6:", 0) != 0) return 4;
  return 2 * static_cast<int>(std::count(server.begin(), server.end(), ',') + 1);
}

absl::StatusOr<BatchArgs> ParseArgs(const std::vector<std::string>& args,
                                    const std::string& server) {
  BatchArgs a;
  std::vector<FlagSpec> specs = {{"input"},   {"output"},      {"resume", false},
                                 {"format"},  {"model"},       {"concurrency"},
                                 {"retries"}, {"top-predictions"}, {"deadline"},
                                 {"shard"},   {"export-dir"},  {"attention-layers"},
                                 {"attention-heads"}, {"attention-dtype"}};
  for (FlagSpec& spec : AnalysisSettingsFlagSpecs()) specs.push_back(std::move(spec));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.flags, Flags::Parse(args, specs));
  ATTNSCOPE_ASSIGN_OR_RETURN(a.exports, ParseTensorOutputFlags(a.flags, "export-dir", "DIR"));
  if (a.flags.Has("export-dir") && a.exports.export_path.empty()) {
    return absl::InvalidArgumentError("--export-dir needs a directory");
  }
  for (const char* name : {"input", "output"}) {
    if (a.flags.Get(name).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " FILE is required"));
    }
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(a.format, ParseInputFormat(a.flags.Get("format", "auto")));
  if (a.flags.Has("shard")) {
    ATTNSCOPE_ASSIGN_OR_RETURN(a.shard, ParseShard(a.flags.Get("shard")));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(a.settings, ParseAnalysisSettings(a.flags));
  if (server.empty()) {
    for (const char* name : {"concurrency", "retries"}) {
      if (a.flags.Has(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", name, " applies with --server only (a local run analyzes one prompt at a "
            "time with every core)"));
      }
    }
  } else {
    ATTNSCOPE_RETURN_IF_ERROR(RejectLocalOnlyFlags(a.flags, {"threads", "device"}));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t concurrency,
                             a.flags.GetInt("concurrency", DefaultConcurrency(server), 1, 1024));
  a.concurrency = static_cast<int>(concurrency);
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t retries, a.flags.GetInt("retries", 5, 0, 100));
  a.retries = static_cast<int>(retries);
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t top, a.flags.GetInt("top-predictions", 0, 0, 100));
  a.top_k = static_cast<int>(top);
  ATTNSCOPE_ASSIGN_OR_RETURN(a.deadline, ParseDeadline(a.flags));
  return a;
}

// Analyzes one item: its result line, or an error line.
using ItemRunner = std::function<nlohmann::ordered_json(const BatchItem&)>;

// Runs `todo` on `threads` threads (each takes the next item), writing each
// line as soon as it is made. A write that fails stops the run.
absl::Status RunPool(const std::vector<const BatchItem*>& todo, int threads,
                     const ItemRunner& run, BatchWriter& writer, BatchProgress& progress) {
  std::atomic<size_t> next{0};
  std::mutex failed_mu;
  absl::Status failed;
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      nlohmann::ordered_json line = todo[i]->error.empty()
                                        ? run(*todo[i])
                                        : BatchErrorLine(todo[i]->id, todo[i]->line, todo[i]->error);
      absl::Status written = writer.Write(line);
      if (!written.ok()) {
        std::lock_guard<std::mutex> lock(failed_mu);
        if (failed.ok()) failed = written;
        next = todo.size();
        return;
      }
      progress.Done(!line.contains("error"), line.value("replica", ""));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(todo.size())); ++t) {
    pool.emplace_back(work);
  }
  work();
  for (std::thread& t : pool) t.join();
  return failed;
}

// RunPool, but with several threads the first prompt goes alone: the
// channel connects to every replica while it runs, so that round_robin
// spreads the rest over all of them instead of sending the first `threads`
// requests to the first replica ready.
absl::Status RunItems(const std::vector<const BatchItem*>& todo, int threads,
                      const ItemRunner& run, BatchWriter& writer, BatchProgress& progress) {
  if (threads <= 1 || todo.size() <= 1) return RunPool(todo, 1, run, writer, progress);
  ATTNSCOPE_RETURN_IF_ERROR(RunPool({todo.front()}, 1, run, writer, progress));
  return RunPool(std::vector<const BatchItem*>(todo.begin() + 1, todo.end()), threads, run, writer,
                 progress);
}

bool Retryable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsResourceExhausted(status);
}

// One prompt's export file under --export-dir (nothing without it): the
// tensors the pass must publish go to `outputs`.
struct ItemExport {
  std::string path;
  std::unique_ptr<TensorOutputs> outputs;
};

absl::StatusOr<ItemExport> StartExport(const BatchArgs& a, const BatchItem& item,
                                       const std::pair<int64_t, int64_t>& shape,
                                       engine::AnalysisSettings& settings) {
  ItemExport out;
  if (a.exports.export_path.empty()) return out;
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string name, ExportFileName(item.id));
  out.path = (std::filesystem::path(a.exports.export_path) / name).string();
  TensorOutputFlags flags = a.exports;
  flags.export_path = out.path;
  ATTNSCOPE_ASSIGN_OR_RETURN(out.outputs, TensorOutputs::Plan(flags, shape.first, shape.second));
  out.outputs->set_quiet(true);
  ATTNSCOPE_RETURN_IF_ERROR(out.outputs->Open());
  settings.tensor_request = out.outputs->Request();
  settings.tensor_sink = out.outputs.get();
  return out;
}

// The result line, with "export" once the file is complete; an error line
// if it cannot be completed (the partial file is removed).
nlohmann::ordered_json FinishItem(const BatchItem& item, const std::string& model,
                                  const engine::Prompt& prompt, const engine::AnalysisRun& run,
                                  const std::string& replica, int top_k, ItemExport& out) {
  if (out.outputs != nullptr) {
    absl::Status written = out.outputs->Finish(model, prompt, run);
    out.outputs.reset();
    if (!written.ok()) return BatchErrorLine(item.id, item.line, std::string(written.message()));
  }
  nlohmann::ordered_json line = BatchResultLine(item.id, model, prompt, run, replica, top_k);
  if (!out.path.empty()) line["export"] = out.path;
  return line;
}

// The remote runner: one client (one channel, round_robin) shared by every
// thread; UNAVAILABLE and RESOURCE_EXHAUSTED are tried again with back-off.
ItemRunner RemoteRunner(rpc::RemoteClient& client, const BatchArgs& a,
                        std::pair<int64_t, int64_t> shape, BatchProgress& progress) {
  return [&client, &a, shape, &progress](const BatchItem& item) {
    absl::Status last;
    for (int attempt = 0; attempt <= a.retries; ++attempt) {
      if (attempt > 0) {
        progress.Retried();
        const double wait = std::min(10.0, 0.5 * static_cast<double>(1 << std::min(attempt - 1, 5)));
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      }
      engine::AnalysisSettings settings = a.settings;
      auto exported = StartExport(a, item, shape, settings);  // afresh for each try
      if (!exported.ok()) {
        return BatchErrorLine(item.id, item.line, std::string(exported.status().message()));
      }
      std::string model, peer;
      auto remote = client.Analyze(RemoteModelName(a.flags), item.prompt, settings, &model, &peer);
      if (remote.ok()) {
        return FinishItem(item, model, remote->first, remote->second, peer, a.top_k, *exported);
      }
      last = ExplainDeadline(remote.status(), a.deadline);
      if (!Retryable(last)) break;
      if (attempt == a.retries) {
        last = absl::Status(last.code(), absl::StrCat(last.message(), " (after ", a.retries + 1,
                                                      " tries; see --retries)"));
      }
    }
    return BatchErrorLine(item.id, item.line, std::string(last.message()));
  };
}

ItemRunner LocalRunner(const engine::ModelBundle& bundle, const BatchArgs& a) {
  const std::string model = std::filesystem::path(bundle.directory).filename().string();
  const std::pair<int64_t, int64_t> shape = {bundle.config().num_layers, bundle.config().num_heads};
  return [&bundle, &a, model, shape](const BatchItem& item) {
    auto prompt = PromptFromSpec(bundle, item.prompt);
    if (!prompt.ok()) return BatchErrorLine(item.id, item.line, std::string(prompt.status().message()));
    engine::AnalysisSettings settings = a.settings;
    settings.should_stop = LocalDeadline(a.deadline);
    auto exported = StartExport(a, item, shape, settings);
    if (!exported.ok()) {
      return BatchErrorLine(item.id, item.line, std::string(exported.status().message()));
    }
    auto run = engine::RunAnalysis(bundle, *prompt, settings);
    if (!run.ok()) {
      return BatchErrorLine(item.id, item.line,
                            std::string(ExplainDeadline(run.status(), a.deadline).message()));
    }
    return FinishItem(item, model, *prompt, *run, "", a.top_k, *exported);
  };
}

// With --export-dir: two ids that make the same file name (the integer 7 and
// the string "7") are refused before anything runs, naming both lines.
// Checked over the whole input, so shards never collide.
absl::Status CheckExportNames(const std::vector<BatchItem>& items) {
  std::map<std::string, int64_t> line_of;
  for (const BatchItem& item : items) {
    absl::StatusOr<std::string> name = ExportFileName(item.id);
    if (!name.ok()) continue;  // that prompt's error line says why
    const auto [it, inserted] = line_of.emplace(*name, item.line);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--export-dir: the ids of lines ", it->second, " and ", item.line,
          " both make the file name ", *name, "; give them ids that differ as text"));
    }
  }
  return absl::OkStatus();
}

absl::Status MakeExportDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--export-dir ", dir, ": cannot make the directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : " (a file of that name exists)"));
  }
  return absl::OkStatus();
}

}  // namespace

int RunBatch(const std::vector<std::string>& args, const std::string& server) {
  if (WantsHelp(args)) {
    std::cout << kHelp;
    return kExitOk;
  }
  auto parsed = ParseArgs(args, server);
  if (!parsed.ok()) return UsageError("batch", parsed.status());
  BatchArgs& a = *parsed;
  auto items = ReadBatchInput(a.flags.Get("input"), a.format);
  if (!items.ok()) return RuntimeError("batch", items.status());
  if (!a.exports.export_path.empty()) {
    if (absl::Status names = CheckExportNames(*items); !names.ok()) {
      return RuntimeError("batch", names);
    }
  }
  *items = TakeShard(std::move(*items), a.shard);
  // The model loads before the output is touched: a bad --model changes nothing.
  std::unique_ptr<engine::ModelBundle> bundle;
  std::unique_ptr<rpc::RemoteClient> client;
  std::pair<int64_t, int64_t> shape;  // layers, heads
  if (server.empty()) {
    auto loaded = LoadModelFromFlags(a.flags);
    if (!loaded.ok()) return RuntimeError("batch", loaded.status());
    bundle = std::move(*loaded);
    shape = {bundle->config().num_layers, bundle->config().num_heads};
  } else {
    client = std::make_unique<rpc::RemoteClient>(server, RemoteSecurity());
    rpc::CallOptions options;
    options.deadline_seconds = a.deadline;
    options.batch = true;
    client->SetCallOptions(options);
    if (!a.exports.export_path.empty()) {  // the exports' shape
      auto served = RemoteShape(*client, RemoteModelName(a.flags));
      if (!served.ok()) return RuntimeError("batch", served.status());
      shape = *served;
    }
  }
  if (!a.exports.export_path.empty()) {  // a layer or head the model lacks
    auto planned = TensorOutputs::Plan(a.exports, shape.first, shape.second);
    if (!planned.ok()) return UsageError("batch", planned.status());
    if (absl::Status dir = MakeExportDir(a.exports.export_path); !dir.ok()) {
      return RuntimeError("batch", dir);
    }
  }
  auto writer = BatchWriter::Open(a.flags.Get("output"), a.flags.Has("resume"));
  if (!writer.ok()) {
    return absl::IsAlreadyExists(writer.status()) ? UsageError("batch", writer.status())
                                                  : RuntimeError("batch", writer.status());
  }
  if ((*writer)->dropped_bytes() > 0) {
    std::cerr << "attnscope batch: dropped a cut-off last line (" << (*writer)->dropped_bytes()
              << " bytes) of " << a.flags.Get("output") << "; that prompt runs again\n";
  }
  std::vector<const BatchItem*> todo;
  for (const BatchItem& item : *items) {
    if ((*writer)->done_keys().count(item.key) == 0) todo.push_back(&item);
  }
  BatchProgress progress(static_cast<int64_t>(todo.size()),
                         static_cast<int64_t>(items->size() - todo.size()),
                         isatty(STDERR_FILENO) != 0);
  const ItemRunner run =
      bundle ? LocalRunner(*bundle, a) : RemoteRunner(*client, a, shape, progress);
  absl::Status status = RunItems(todo, bundle ? 1 : a.concurrency, run, **writer, progress);
  std::cerr << progress.Summary() << "\n";
  if (!status.ok()) return RuntimeError("batch", status);
  return progress.errors() > 0 ? kExitError : kExitOk;
}

}  // namespace attnscope::cli
