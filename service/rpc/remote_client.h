// A client of a running attnscope-server that hands back the engine's own
// result types (engine::Prompt, engine::AnalysisRun, engine::GenerationResult)
// rebuilt from the streamed events, so callers print a remote result exactly
// like a local one. Free of gRPC types: the CLI includes only this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "service/engine/analysis_run.h"
#include "service/engine/generation.h"
#include "service/engine/head_scan.h"
#include "service/engine/lens_run.h"
#include "service/engine/patching_run.h"
#include "service/engine/prompt.h"
#include "service/rpc/client_security.h"
#include "service/rpc/model_description.h"

namespace attnscope::rpc {

// A prompt as text (when set) or as token ids.
struct PromptSpec {
  std::optional<std::string> text;
  std::vector<int64_t> ids;
  // A conversation [{"role","content"}, ...] for the model's chat template.
  std::optional<nlohmann::json> chat;
  bool add_generation_prompt = false;
  // Chat only: extra template variables (chat_template_kwargs, tools).
  nlohmann::json chat_kwargs = nlohmann::json::object();
  std::optional<bool> add_special_tokens;  // text only; unset: the server's default (true)
};

// What a Lens call asks for; positions and queries as the CLI spells them
// ("last", "all", "0,5,10-13"; "" = last).
struct LensQuery {
  bool lens = true, attribution = false, rollout = false;
  std::string lens_positions, attribution_positions, rollout_queries;
  std::optional<int64_t> top_k;
  std::vector<int64_t> target_ids;
  std::string target_text;  // one token's text
  std::optional<model::Precision> precision;  // unset: the server's --precision
  int64_t query_block_size = 0;
};

struct RemoteLens {
  std::string model;  // the served model that ran
  int64_t num_layers = 0;
  engine::Prompt prompt;  // token_bytes hold display texts
  engine::LensRun run;
};

// An activation patching run: each prompt as text or ids.
struct PatchQuery {
  PromptSpec clean, corrupted;
  engine::PatchTarget what = engine::PatchTarget::kHeads;
  std::optional<int64_t> target_a_id, target_b_id;
  std::string target_a_text, target_b_text;
  std::optional<model::Precision> precision;
  int64_t query_block_size = 0;
};

struct RemotePatch {
  std::string model;
  engine::Prompt clean, corrupted;
  engine::PatchRun run;
};

struct RemoteGeneration {
  engine::Prompt prompt;            // token_bytes hold display texts
  engine::GenerationResult result;  // prompt entropies are not sent: empty
  double tokens_per_second = 0;
};

// The induction probe of a ScanHeads or Ablate call: exactly one set.
struct ProbeSource {
  std::optional<engine::ProbeSpec> random;  // n, num_sequences, seed (ids 1000..9999)
  std::optional<engine::Probe> sequences;   // as read from an ids file
  std::optional<std::string> text;          // BOS + its tokens + the same tokens
};

// What ScanHeads and Ablate return: the served model's name and the probe
// that ran, with the scan or the ablation table.
struct RemoteHeadScan {
  std::string model;
  engine::Probe probe;
  engine::HeadScan scan;
};
struct RemoteAblation {
  std::string model;
  engine::Probe probe;
  std::vector<engine::AblationRow> rows;
};

// How calls wait.
struct CallOptions {
  // > 0: the call fails with DeadlineExceeded after this many seconds (the
  // server sees the deadline too and stops working on the request).
  double deadline_seconds = 0;
  // Called once, from another thread, when no event of the reply has arrived
  // after `slow_start_seconds` (the request is queued on the server, or its
  // first step is slow); never called when the first event comes in time.
  std::function<void()> on_slow_start;
  double slow_start_seconds = 1.0;
  // Analyze requests are a dataset's prompts (`attnscope batch`): the server
  // counts them with the metrics label origin="batch".
  bool batch = false;
};

class RemoteClient {
 public:
  // `target` is host:port or any gRPC target URI (dns:///host:port,
  // ipv4:a:p1,b:p2, ...); calls are spread over every address it resolves to
  // with gRPC's round_robin policy (see client_channel.h). Nothing is sent
  // until the first call. `security` adds TLS and the bearer token; when one
  // of its files cannot be read, every call fails with that InvalidArgument.
  // No default: a caller says which security it connects with (the CLI's
  // commands pass the connection flags' RemoteSecurity()).
  RemoteClient(const std::string& target, ClientSecurity security);
  ~RemoteClient();

  // Applies to the following calls (all but ListModels and CheckHealth).
  void SetCallOptions(CallOptions options);

  // Errors: the gRPC status with the message "CODE_NAME: message" (a failure
  // to connect with a hint about TLS, see ExplainTransportError).
  absl::StatusOr<std::vector<ModelDescription>> ListModels();

  // grpc.health.v1 Check of `service` ("" = the whole server) with a
  // deadline: the serving status's name ("SERVING", "NOT_SERVING", ...), or
  // the gRPC error (UNAVAILABLE when nothing answers, DEADLINE_EXCEEDED).
  absl::StatusOr<std::string> CheckHealth(const std::string& service, double timeout_seconds);

  // Analyze with the settings' threshold, structure and query block size
  // (should_stop and extra observers do not travel). With record_tensors the
  // server streams every attention, hidden state and the logits (float32),
  // and run.tensors holds them exactly as a local run's recorder would.
  // `model` "" is the server's default; *served_model (when non-null) gets
  // the name of the model that ran. run.forward_seconds is the server's
  // compute time. *peer (when non-null) gets the address of the replica
  // that answered as gRPC names it ("ipv4:10.0.0.7:50051"), also when the
  // call failed after connecting. InvalidArgument if the stream is malformed.
  absl::StatusOr<std::pair<engine::Prompt, engine::AnalysisRun>> Analyze(
      const std::string& model, const PromptSpec& prompt, const engine::AnalysisSettings& settings,
      std::string* served_model = nullptr, std::string* peer = nullptr);

  // The prompt (text or chat; ids are refused by the server) through the
  // model's tokenizer: ids, token strings, byte offsets, special flags, and
  // `text` (the rendered conversation for a chat). *served_model as Analyze.
  absl::StatusOr<engine::Prompt> Tokenize(const std::string& model, const PromptSpec& prompt,
                                          std::string* served_model = nullptr);

  // engine::ScanHeads / engine::AblationTable on the server. InvalidArgument
  // if the response is malformed.
  absl::StatusOr<RemoteHeadScan> ScanHeads(const std::string& model, const ProbeSource& probe);
  absl::StatusOr<RemoteAblation> Ablate(const std::string& model, const ProbeSource& probe,
                                        const std::vector<model::HeadRef>& heads,
                                        model::AblationMode mode);

  absl::StatusOr<RemoteGeneration> Generate(const std::string& model, const PromptSpec& prompt,
                                            const engine::GenerationSettings& settings);

  // The Lens and Patch streams rebuilt into the engine's LensRun and
  // PatchRun (`progress` after each patched pass, as a local run calls it).
  // InvalidArgument if the stream is malformed.
  absl::StatusOr<RemoteLens> Lens(const std::string& model, const PromptSpec& prompt,
                                  const LensQuery& query);
  absl::StatusOr<RemotePatch> Patch(const std::string& model, const PatchQuery& query,
                                    const std::function<void(const engine::PatchStep&)>& progress);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::rpc
