// The Lens and Patch streams' messages <-> the engine's LensRun and
// PatchRun (lens_rpc.cc sends them, RemoteClient reads them back).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/engine/lens_run.h"
#include "service/engine/patching_run.h"

namespace attnscope::rpc {

// At most this many cells x top-k tokens per LensState message.
constexpr int64_t kLensTokensPerMessage = 16384;

// State `state`'s cells (positions[k] for cells[k]) as LensState messages
// of at most kLensTokensPerMessage tokens and 256 cells each.
std::vector<attnscope::v1::LensState> LensStatesToProto(int state,
                                                        const std::vector<int64_t>& positions,
                                                        const std::vector<analysis::LensCell>& cells);
attnscope::v1::PositionAttribution AttributionToProto(const analysis::PositionAttribution& a,
                                                      const std::string& target_token);
// One message per (layer, query): the row's entries 0..query.
std::vector<attnscope::v1::RolloutRow> RolloutToProto(const analysis::Rollout& rollout);

// Collects a Lens stream's results into the LensRun a local pass gives
// (lens cells, attribution, rollout rows). Add* return InvalidArgument
// ("the server's stream is malformed: ...") for a message that does not
// fit what came before.
class LensCollector {
 public:
  absl::Status AddLens(const attnscope::v1::LensState& state);
  absl::Status AddAttribution(const attnscope::v1::PositionAttribution& a);
  absl::Status AddRollout(const attnscope::v1::RolloutRow& row);
  // With the summary and the prompt's length: the run; checks that every
  // state of the lens arrived for every position the summary lists.
  absl::StatusOr<engine::LensRun> Finish(const attnscope::v1::LensSummary& summary,
                                         int64_t num_tokens, bool lens, bool attribution,
                                         bool rollout);

 private:
  // lens_[s]: (position, cell) in arrival order.
  std::vector<std::vector<std::pair<int64_t, analysis::LensCell>>> lens_;
  engine::LensRun run_;
  std::vector<int64_t> rollout_queries_;
  std::vector<std::vector<std::vector<double>>> rollout_rows_;  // [layer][query]
};

attnscope::v1::PatchKind PatchKindToProto(engine::PatchTarget what);
attnscope::v1::PatchStep PatchStepToProto(const engine::PatchStep& step);

}  // namespace attnscope::rpc
