#include "service/rpc/head_scan_convert.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace attnscope::rpc {
namespace {

namespace v1 = ::attnscope::v1;

void AddGrid(const analysis::HeadGrid& grid, google::protobuf::RepeatedField<double>* out) {
  for (const std::vector<double>& row : grid) out->Add(row.begin(), row.end());
}

absl::StatusOr<analysis::HeadGrid> GridFromProto(const google::protobuf::RepeatedField<double>& flat,
                                                 int layers, int heads, const char* field) {
  if (layers < 1 || heads < 1 || flat.size() != static_cast<int64_t>(layers) * heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the server's HeadScanResponse is malformed: ", field, " has ", flat.size(),
        " values for ", layers, " x ", heads, " heads"));
  }
  analysis::HeadGrid grid(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    grid[l].assign(flat.begin() + l * heads, flat.begin() + (l + 1) * heads);
  }
  return grid;
}

}  // namespace

v1::ProbeRun ProbeRunToProto(const engine::Probe& probe) {
  v1::ProbeRun out;
  out.set_n(probe.n);
  for (const std::vector<int64_t>& sequence : probe.sequences) {
    out.add_sequences()->mutable_ids()->Add(sequence.begin(), sequence.end());
  }
  return out;
}

engine::Probe ProbeRunFromProto(const v1::ProbeRun& run) {
  engine::Probe probe;
  probe.n = run.n();
  for (const v1::TokenIds& ids : run.sequences()) {
    probe.sequences.emplace_back(ids.ids().begin(), ids.ids().end());
  }
  return probe;
}

void HeadScanToProto(const engine::HeadScan& scan, int num_layers, int num_heads,
                     v1::HeadScanResponse* out) {
  out->set_num_layers(num_layers);
  out->set_num_heads(num_heads);
  AddGrid(scan.prev_token, out->mutable_prev_token_score());
  AddGrid(scan.induction, out->mutable_induction_score());
  AddGrid(scan.sink, out->mutable_sink_score());
  out->set_loss_first_half(scan.loss.first);
  out->set_loss_second_half(scan.loss.second);
}

absl::StatusOr<engine::HeadScan> HeadScanFromProto(const v1::HeadScanResponse& r) {
  if (r.probe().sequences().empty()) {
    return absl::InvalidArgumentError("the server's HeadScanResponse is malformed: no probe");
  }
  engine::HeadScan scan;
  scan.n = r.probe().n();
  scan.num_sequences = r.probe().sequences_size();
  const int l = r.num_layers(), h = r.num_heads();
  auto prev = GridFromProto(r.prev_token_score(), l, h, "prev_token_score");
  if (!prev.ok()) return prev.status();
  auto induction = GridFromProto(r.induction_score(), l, h, "induction_score");
  if (!induction.ok()) return induction.status();
  auto sink = GridFromProto(r.sink_score(), l, h, "sink_score");
  if (!sink.ok()) return sink.status();
  scan.prev_token = std::move(*prev);
  scan.induction = std::move(*induction);
  scan.sink = std::move(*sink);
  scan.loss.first = r.loss_first_half();
  scan.loss.second = r.loss_second_half();
  return scan;
}

v1::HeadRef HeadRefToProto(const model::HeadRef& head) {
  v1::HeadRef out;
  out.set_layer(head.layer);
  out.set_head(head.head);
  return out;
}

model::HeadRef HeadRefFromProto(const v1::HeadRef& head) { return {head.layer(), head.head()}; }

void AblationRowsToProto(const std::vector<engine::AblationRow>& rows, v1::AblateResponse* out) {
  for (const engine::AblationRow& row : rows) {
    v1::AblationRow* r = out->add_rows();
    for (const model::HeadRef& head : row.heads) *r->add_heads() = HeadRefToProto(head);
    r->set_loss_first_half(row.loss.first);
    r->set_loss_second_half(row.loss.second);
  }
}

std::vector<engine::AblationRow> AblationRowsFromProto(const v1::AblateResponse& response) {
  std::vector<engine::AblationRow> rows;
  for (const v1::AblationRow& r : response.rows()) {
    engine::AblationRow row;
    for (const v1::HeadRef& head : r.heads()) row.heads.push_back(HeadRefFromProto(head));
    row.loss = {r.loss_first_half(), r.loss_second_half()};
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace attnscope::rpc
