#include "service/cli/generate_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/text_report.h"

namespace attnscope::cli {
namespace {

constexpr int kTokenWidth = 16;

nlohmann::json TokenJson(const engine::GeneratedToken& t) {
  nlohmann::json alternatives = nlohmann::json::array();
  for (const engine::Alternative& a : t.alternatives) {
    alternatives.push_back({{"id", a.id}, {"text", a.text}, {"probability", a.probability}});
  }
  nlohmann::json out = {{"index", t.index},
                        {"position", t.position},
                        {"id", t.id},
                        {"text", t.text},
                        {"probability", t.probability},
                        {"entropy_nats", t.entropy_nats},
                        {"entropy_normalized", t.entropy_normalized},
                        {"alternatives", alternatives}};
  if (!t.sink_scores.empty()) out["sink_scores"] = t.sink_scores;
  return out;
}

// A token's text quoted and padded to a fixed number of cells.
std::string Cell(const std::string& text) {
  std::string shown = absl::StrCat("\"", analysis::DisplayToken(text, kTokenWidth), "\"");
  size_t cells = 0;
  for (char c : shown) cells += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  if (cells < kTokenWidth + 2) shown.append(kTokenWidth + 2 - cells, ' ');
  return shown;
}

}  // namespace

nlohmann::json GenerationJson(const engine::Prompt& prompt, const engine::GenerationResult& result,
                              double tokens_per_second) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const engine::GeneratedToken& t : result.tokens) tokens.push_back(TokenJson(t));
  return {{"input_ids", prompt.ids},
          {"prompt_tokens", prompt.tokens},
          {"text", result.text},
          {"stop_reason", result.stop_reason},
          {"generated_tokens", result.tokens.size()},
          {"tokens", tokens},
          {"tokens_per_second", tokens_per_second}};
}

std::string GenerationTable(const engine::GenerationResult& result) {
  std::string out = absl::StrCat(result.text, "\n\n", result.tokens.size(),
                                 " new tokens (stop: ", result.stop_reason, ")\n\n");
  absl::StrAppend(&out, absl::StrFormat("%5s %5s  %-*s %8s %9s %6s  %s\n", "#", "pos",
                                        kTokenWidth + 2, "token", "prob", "entropy", "norm",
                                        "top alternative"));
  for (const engine::GeneratedToken& t : result.tokens) {
    std::string best;
    if (!t.alternatives.empty()) {
      best = absl::StrFormat("%s %.4f", Cell(t.alternatives.front().text),
                             t.alternatives.front().probability);
    }
    absl::StrAppend(&out, absl::StrFormat("%5d %5d  %s %8.4f %9.4f %6.3f  %s\n", t.index,
                                          t.position, Cell(t.text), t.probability,
                                          t.entropy_nats, t.entropy_normalized, best));
  }
  return out;
}

}  // namespace attnscope::cli
