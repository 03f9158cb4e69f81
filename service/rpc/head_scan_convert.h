// Conversions between the ScanHeads/Ablate messages and engine::HeadScan,
// engine::AblationRow and engine::Probe. Doubles travel exactly, so `attnscope
// --server ... heads|ablate` prints what the local commands print.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "attnscope/v1/attnscope.pb.h"
#include "service/engine/head_scan.h"

namespace attnscope::rpc {

// The probe as it ran (n and every sequence).
attnscope::v1::ProbeRun ProbeRunToProto(const engine::Probe& probe);
engine::Probe ProbeRunFromProto(const attnscope::v1::ProbeRun& run);

// The three grids (flattened layer-major, L x H values each) and the half
// losses of `scan` into `out` (model, probe and timing are the caller's).
// Every grid of `scan` must be num_layers x num_heads.
void HeadScanToProto(const engine::HeadScan& scan, int num_layers, int num_heads,
                     attnscope::v1::HeadScanResponse* out);
// The scan of a response (n and num_sequences from its probe).
// InvalidArgument when a grid does not hold num_layers x num_heads values or
// the probe has no sequences (a broken server or stream).
absl::StatusOr<engine::HeadScan> HeadScanFromProto(const attnscope::v1::HeadScanResponse& response);

attnscope::v1::HeadRef HeadRefToProto(const model::HeadRef& head);
model::HeadRef HeadRefFromProto(const attnscope::v1::HeadRef& head);

// The table rows, in order.
void AblationRowsToProto(const std::vector<engine::AblationRow>& rows,
                         attnscope::v1::AblateResponse* out);
std::vector<engine::AblationRow> AblationRowsFromProto(const attnscope::v1::AblateResponse& response);

}  // namespace attnscope::rpc
