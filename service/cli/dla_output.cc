#include "service/cli/dla_output.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/text_cells.h"
#include "service/analysis/text_report.h"

namespace attnscope::cli {
namespace {

using analysis::text_cells::FormatProbability;
using analysis::text_cells::PadRight;

constexpr int kTokenChars = 12;
constexpr size_t kCellWidth = 8;

std::string Quoted(const std::string& readable) {
  return absl::StrCat("\"", analysis::DisplayToken(readable, kTokenChars), "\"");
}

nlohmann::json Number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

std::string Signed(double x) { return absl::StrFormat("%+.3f", x); }

const char* SourceText(analysis::TargetSource source) {
  switch (source) {
    case analysis::TargetSource::kGiven:
      return "given";
    case analysis::TargetSource::kNextToken:
      return "the next token";
    case analysis::TargetSource::kTopPrediction:
      return "the model's top prediction";
  }
  return "given";
}

}  // namespace

nlohmann::json AttributionJson(const std::string& model, const engine::Prompt& prompt,
                               const engine::LensRun& run) {
  const analysis::LogitAttribution& a = run.attribution;
  nlohmann::json positions = nlohmann::json::array();
  for (size_t k = 0; k < a.positions.size(); ++k) {
    const analysis::PositionAttribution& p = a.positions[k];
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& layer : p.heads) {
      nlohmann::json row = nlohmann::json::array();
      for (double c : layer) row.push_back(Number(c));
      heads.push_back(std::move(row));
    }
    nlohmann::json bias = nlohmann::json::array(), mlp = nlohmann::json::array();
    for (double c : p.attention_bias) bias.push_back(Number(c));
    for (double c : p.mlp) mlp.push_back(Number(c));
    positions.push_back(
        {{"position", p.position},
         {"token", analysis::ReadableBytes(prompt.token_bytes[static_cast<size_t>(p.position)])},
         {"target",
          {{"id", p.target},
           {"token", run.target_tokens[k]},
           {"source", analysis::TargetSourceName(p.source)}}},
         {"logit", Number(p.logit)},
         {"probability", Number(p.probability)},
         {"total", Number(p.total)},
         {"offset", Number(p.offset)},
         {"embedding", Number(p.embedding)},
         {"heads", std::move(heads)},
         {"attention_bias", std::move(bias)},
         {"mlp", std::move(mlp)}});
  }
  return {{"model", model},
          {"input_ids", prompt.ids},
          {"tokens", a.num_tokens},
          {"num_layers", a.num_layers},
          {"num_heads", a.num_heads},
          {"forward_seconds", run.forward_seconds},
          {"positions", std::move(positions)}};
}

std::string RenderAttribution(const engine::Prompt& prompt, const engine::LensRun& run,
                              int64_t top) {
  const analysis::LogitAttribution& a = run.attribution;
  std::string out = absl::StrCat("attnscope dla  ", a.num_tokens, " tokens, ", a.num_layers,
                                 " layers x ", a.num_heads, " heads\n\n");
  out +=
      "Direct logit attribution: each part's direct contribution to the target's logit, read "
      "out through the final norm with its scale frozen (service/analysis/definitions.md).\n\n";
  for (size_t k = 0; k < a.positions.size(); ++k) {
    const analysis::PositionAttribution& p = a.positions[k];
    double heads = 0, bias = 0, mlp = 0;
    for (size_t l = 0; l < p.heads.size(); ++l) {
      for (double c : p.heads[l]) heads += c;
      bias += p.attention_bias[l];
      mlp += p.mlp[l];
    }
    absl::StrAppend(
        &out, "position ", p.position, " ",
        Quoted(analysis::ReadableBytes(prompt.token_bytes[static_cast<size_t>(p.position)])),
        " -> target ", p.target, " ", Quoted(run.target_tokens[k]), " (", SourceText(p.source),
        "): logit ", absl::StrFormat("%.4f", p.logit), ", p ", FormatProbability(p.probability),
        "\n");
    absl::StrAppend(&out, "  parts sum to ", absl::StrFormat("%.4f", p.total), " = embedding ",
                    Signed(p.embedding), ", heads ", Signed(heads), ", attention biases ",
                    Signed(bias), ", MLPs ", Signed(mlp), ", final-norm bias ",
                    Signed(p.offset), "\n\n");
    // The grid: layers down, heads across, then the layer's bias and MLP.
    out += PadRight("  layer", 9);
    const size_t num_heads = p.heads.empty() ? 0 : p.heads[0].size();
    for (size_t h = 0; h < num_heads; ++h) out += PadRight(absl::StrCat("H", h), kCellWidth);
    out += PadRight("bias", kCellWidth) + "MLP\n";
    for (size_t l = 0; l < p.heads.size(); ++l) {
      out += PadRight(absl::StrCat("  ", l), 9);
      for (double c : p.heads[l]) out += PadRight(Signed(c), kCellWidth);
      out += PadRight(Signed(p.attention_bias[l]), kCellWidth) + Signed(p.mlp[l]) + "\n";
    }
    // The largest parts.
    std::vector<std::pair<double, std::string>> parts;
    parts.emplace_back(p.embedding, "embedding");
    for (size_t l = 0; l < p.heads.size(); ++l) {
      for (size_t h = 0; h < p.heads[l].size(); ++h) {
        parts.emplace_back(p.heads[l][h], absl::StrCat("L", l, "H", h));
      }
      parts.emplace_back(p.mlp[l], absl::StrCat("MLP ", l));
    }
    const auto shown = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(top, 0)),
                                        parts.size());
    std::partial_sort(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(shown),
                      parts.end(), [](const auto& x, const auto& y) {
                        return std::fabs(x.first) > std::fabs(y.first);
                      });
    if (shown > 0) {
      out += "\n  largest parts:";
      for (size_t i = 0; i < shown; ++i) {
        absl::StrAppend(&out, " ", parts[i].second, " ", Signed(parts[i].first),
                        i + 1 < shown ? "," : "");
      }
      out += "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace attnscope::cli
