#include "service/rpc/lens_convert.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace attnscope::rpc {
namespace {

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError("the server's stream is malformed: " + what);
}

analysis::TargetSource SourceOf(const std::string& name) {
  if (name == analysis::TargetSourceName(analysis::TargetSource::kNextToken)) {
    return analysis::TargetSource::kNextToken;
  }
  if (name == analysis::TargetSourceName(analysis::TargetSource::kTopPrediction)) {
    return analysis::TargetSource::kTopPrediction;
  }
  return analysis::TargetSource::kGiven;
}

}  // namespace

std::vector<v1::LensState> LensStatesToProto(int state, const std::vector<int64_t>& positions,
                                             const std::vector<analysis::LensCell>& cells) {
  std::vector<v1::LensState> out;
  const size_t count = std::min(positions.size(), cells.size());
  for (size_t k = 0; k < count; ++k) {
    const analysis::LensCell& cell = cells[k];
    const auto tokens = static_cast<int64_t>(cell.top.size());
    if (out.empty() || out.back().cells_size() >= 256 ||
        (out.back().cells_size() + 1) * std::max<int64_t>(tokens, 1) > kLensTokensPerMessage) {
      out.emplace_back();
      out.back().set_state(state);
    }
    v1::LensCell* c = out.back().add_cells();
    c->set_position(positions[k]);
    for (const analysis::Prediction& p : cell.top) {
      v1::NextTokenPrediction* t = c->add_top();
      t->set_id(p.id);
      t->set_token(p.token);
      t->set_p(p.p);
    }
    c->set_next_p(cell.next_p);
    c->set_next_rank(cell.next_rank);
    c->set_entropy(cell.entropy);
  }
  return out;
}

v1::PositionAttribution AttributionToProto(const analysis::PositionAttribution& a,
                                           const std::string& target_token) {
  v1::PositionAttribution out;
  out.set_position(a.position);
  out.set_target(a.target);
  out.set_target_token(target_token);
  out.set_target_source(analysis::TargetSourceName(a.source));
  out.set_embedding(a.embedding);
  for (const std::vector<double>& layer : a.heads) out.mutable_heads()->Add(layer.begin(), layer.end());
  out.mutable_attention_bias()->Add(a.attention_bias.begin(), a.attention_bias.end());
  out.mutable_mlp()->Add(a.mlp.begin(), a.mlp.end());
  out.set_offset(a.offset);
  out.set_total(a.total);
  out.set_logit(a.logit);
  out.set_probability(a.probability);
  return out;
}

std::vector<v1::RolloutRow> RolloutToProto(const analysis::Rollout& rollout) {
  std::vector<v1::RolloutRow> out;
  for (size_t l = 0; l < rollout.rows.size(); ++l) {
    for (size_t k = 0; k < rollout.queries.size() && k < rollout.rows[l].size(); ++k) {
      const int64_t query = rollout.queries[k];
      const std::vector<double>& row = rollout.rows[l][k];
      v1::RolloutRow r;
      r.set_layer(static_cast<int32_t>(l));
      r.set_query(query);
      const auto n = std::min<size_t>(row.size(), static_cast<size_t>(query + 1));
      r.mutable_weights()->Add(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n));
      out.push_back(std::move(r));
    }
  }
  return out;
}

absl::Status LensCollector::AddLens(const v1::LensState& state) {
  if (state.state() < 0 || state.state() > 4096) {
    return Malformed(absl::StrCat("a lens state ", state.state()));
  }
  const auto s = static_cast<size_t>(state.state());
  if (lens_.size() <= s) lens_.resize(s + 1);
  for (const v1::LensCell& c : state.cells()) {
    analysis::LensCell cell;
    for (const v1::NextTokenPrediction& t : c.top()) cell.top.push_back({t.id(), t.p(), t.token()});
    cell.next_p = c.next_p();
    cell.next_rank = c.next_rank();
    cell.entropy = c.entropy();
    lens_[s].emplace_back(c.position(), std::move(cell));
  }
  return absl::OkStatus();
}

absl::Status LensCollector::AddAttribution(const v1::PositionAttribution& a) {
  analysis::PositionAttribution p;
  p.position = a.position();
  p.target = a.target();
  p.source = SourceOf(a.target_source());
  p.embedding = a.embedding();
  const auto layers = static_cast<size_t>(a.mlp_size());
  if (layers == 0 || a.heads_size() % a.mlp_size() != 0 ||
      a.attention_bias_size() != a.mlp_size()) {
    return Malformed(absl::StrCat("an attribution of ", a.heads_size(), " head values, ",
                                  a.mlp_size(), " MLP values and ", a.attention_bias_size(),
                                  " attention biases"));
  }
  const size_t heads = static_cast<size_t>(a.heads_size()) / layers;
  for (size_t l = 0; l < layers; ++l) {
    p.heads.emplace_back(a.heads().begin() + static_cast<int>(l * heads),
                         a.heads().begin() + static_cast<int>((l + 1) * heads));
  }
  p.attention_bias.assign(a.attention_bias().begin(), a.attention_bias().end());
  p.mlp.assign(a.mlp().begin(), a.mlp().end());
  p.offset = a.offset();
  p.total = a.total();
  p.logit = a.logit();
  p.probability = a.probability();
  run_.attribution.num_layers = static_cast<int64_t>(layers);
  run_.attribution.num_heads = static_cast<int64_t>(heads);
  run_.attribution.positions.push_back(std::move(p));
  run_.target_tokens.push_back(a.target_token());
  return absl::OkStatus();
}

absl::Status LensCollector::AddRollout(const v1::RolloutRow& row) {
  if (row.layer() < 0 || row.layer() > 4096 || row.query() < 0 ||
      row.weights_size() != row.query() + 1) {
    return Malformed(absl::StrCat("a rollout row of layer ", row.layer(), ", query ",
                                  row.query(), " with ", row.weights_size(), " weights"));
  }
  const auto it = std::find(rollout_queries_.begin(), rollout_queries_.end(), row.query());
  const size_t k = static_cast<size_t>(it - rollout_queries_.begin());
  if (it == rollout_queries_.end()) rollout_queries_.push_back(row.query());
  const auto l = static_cast<size_t>(row.layer());
  if (rollout_rows_.size() <= l) rollout_rows_.resize(l + 1);
  if (rollout_rows_[l].size() <= k) rollout_rows_[l].resize(k + 1);
  rollout_rows_[l][k].assign(row.weights().begin(), row.weights().end());
  return absl::OkStatus();
}

absl::StatusOr<engine::LensRun> LensCollector::Finish(const v1::LensSummary& summary,
                                                      int64_t num_tokens, bool lens,
                                                      bool attribution, bool rollout) {
  engine::LensRun run = std::move(run_);
  run.forward_seconds = summary.timings().compute_seconds();
  if (lens) {
    analysis::LogitLens out;
    out.num_tokens = num_tokens;
    out.vocab = summary.vocab_size();
    out.positions.assign(summary.lens_positions().begin(), summary.lens_positions().end());
    const auto states = static_cast<size_t>(summary.num_layers()) + 1;
    if (lens_.size() != states) {
      return Malformed(absl::StrCat("the lens of ", lens_.size(), " hidden states for a model of ",
                                    summary.num_layers(), " layers"));
    }
    for (size_t s = 0; s < states; ++s) {
      std::vector<analysis::LensCell> cells;
      if (lens_[s].size() != out.positions.size()) {
        return Malformed(absl::StrCat("state ", s, " has ", lens_[s].size(), " cells for ",
                                      out.positions.size(), " positions"));
      }
      for (size_t k = 0; k < lens_[s].size(); ++k) {
        if (lens_[s][k].first != out.positions[k]) {
          return Malformed(absl::StrCat("state ", s, " cell ", k, " is at position ",
                                        lens_[s][k].first, ", expected ", out.positions[k]));
        }
        cells.push_back(std::move(lens_[s][k].second));
      }
      out.cells.push_back(std::move(cells));
    }
    run.lens = std::move(out);
  } else if (!lens_.empty()) {
    return Malformed("lens states that were not asked for");
  }
  if (attribution) {
    run.attribution.num_tokens = num_tokens;
    if (run.attribution.positions.empty()) return Malformed("no attribution");
  }
  if (rollout) {
    analysis::Rollout r;
    r.num_tokens = num_tokens;
    r.queries = rollout_queries_;
    for (const auto& layer : rollout_rows_) {
      std::vector<std::vector<double>> rows;
      if (layer.size() != r.queries.size()) return Malformed("a rollout layer without every query");
      for (size_t k = 0; k < layer.size(); ++k) {
        std::vector<double> row = layer[k];
        row.resize(static_cast<size_t>(num_tokens), 0.0);  // zero right of the query
        rows.push_back(std::move(row));
      }
      r.rows.push_back(std::move(rows));
    }
    if (r.rows.size() != static_cast<size_t>(summary.num_layers())) {
      return Malformed(absl::StrCat("the rollout of ", r.rows.size(), " layers for a model of ",
                                    summary.num_layers()));
    }
    run.rollout = std::move(r);
  }
  return run;
}

v1::PatchKind PatchKindToProto(engine::PatchTarget what) {
  return what == engine::PatchTarget::kResidual ? v1::PATCH_KIND_RESIDUAL : v1::PATCH_KIND_HEADS;
}

v1::PatchStep PatchStepToProto(const engine::PatchStep& step) {
  v1::PatchStep out;
  out.set_layer(static_cast<int32_t>(step.layer));
  out.set_column(step.column);
  out.set_metric(step.metric);
  out.set_recovery(step.recovery);
  out.set_done(step.done);
  out.set_total(step.total);
  return out;
}

}  // namespace attnscope::rpc
