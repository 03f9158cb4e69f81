// Conversions between attnscope.v1 messages and the engine's and analysis
// library's plain types. The server builds messages with the *ToProto
// functions and the client rebuilds the very same values with the *FromProto
// ones (doubles travel exactly), so a remote analysis prints exactly like a
// local one.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/analysis/head_stats.h"
#include "service/analysis/prompt_stats.h"
#include "service/analysis/structural.h"
#include "service/engine/generation.h"
#include "service/engine/prompt.h"
#include "service/rpc/model_description.h"

namespace attnscope::rpc {

namespace v1 = ::attnscope::v1;

v1::ModelInfo ModelToProto(const ModelDescription& model);
ModelDescription ModelFromProto(const v1::ModelInfo& info);

// ids, token strings, display texts (Prompt::Display), byte spans, special
// flags and the prompt's text.
v1::Tokens TokensToProto(const engine::Prompt& prompt);
// The prompt as a client sees it: token_bytes holds the display texts
// (byte fragments as <0xNN>, which is what every report shows anyway) and
// `text` the prompt's text.
engine::Prompt PromptFromProto(const v1::Tokens& tokens);

// The numbers of `layer` (a row of every grid in `heads`, which must have at
// least layer + 1 rows): sink score, first-token mass and importance, entropy,
// previous-token score, and the value-weighted shares when the grids have them.
// `hidden_norms` (T values, ||X[layer+1, i, :]||) is added when non-null.
v1::LayerStats LayerStatsToProto(int layer, const analysis::HeadStats& heads,
                                 const std::vector<double>* hidden_norms);

// Everything per prompt (timings are left for the caller). Sink texts come
// from `prompt`.
v1::Summary SummaryToProto(const analysis::PromptStats& stats, analysis::Structure structure,
                           const engine::Prompt& prompt);

// Rebuilds the statistics from the L layer events (in layer order, each with
// hidden-state norms) and the summary. vocab is left 0 (the messages do not
// carry it) and induction scores empty. InvalidArgument naming the message
// and field when the events disagree in size (a broken server or stream).
absl::StatusOr<analysis::PromptStats> StatsFromProto(const std::vector<v1::LayerStats>& layers,
                                                     const v1::Summary& summary);

v1::GeneratedToken GeneratedTokenToProto(const engine::GeneratedToken& token);
engine::GeneratedToken GeneratedTokenFromProto(const v1::GeneratedToken& token);

}  // namespace attnscope::rpc
