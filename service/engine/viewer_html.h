// The attention viewer: one self-contained HTML page (plain JavaScript and
// SVG, no network) with a prompt's attention weights embedded as JSON, where
// a person picks a layer and a head and hovers a query token to see which
// keys it reads. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace attnscope::engine {

struct ViewerData {
  std::string title;        // shown in the header (e.g. the model directory's name)
  std::string prompt_text;  // shown under the title; may be empty
  std::vector<std::string> tokens;  // T labels (invalid UTF-8 is replaced)
  int64_t num_layers = 0;   // L
  int64_t num_heads = 0;    // H
  int64_t num_tokens = 0;   // T
  absl::Span<const float> attentions;  // (L, H, T, T), rows = queries
};

// The page. Embedded data: {"title", "prompt", "tokens" [T], "layers",
// "heads", "attentions" [L][H][i][0..i]}: only the causal lower triangle,
// each weight rounded to 7 decimals (error <= 5e-8). In the page, rect.cell
// elements (data-i = query, data-j = key, data-w = weight, fill-opacity =
// weight) exist only for j <= i; the hovered row's cells get class "hl" and
// its weights are listed in #readout (.entry[data-j] > .num, 4 decimals).
// Opening the page as FILE#test=l,h,i selects layer l and head h, hovers row
// i and writes what is drawn as JSON into <pre id="test-output">.
// InvalidArgument when a dimension is < 1, tokens.size() != T or the span's
// size is not L*H*T*T.
absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data);

// Renders and writes the page; the errors of RenderViewerHtml, and Internal
// naming the path when it cannot be written.
absl::Status WriteViewerHtml(const std::string& path, const ViewerData& data);

namespace internal {
// The page template: "__ATTNSCOPE_DATA__" is replaced by the JSON data.
extern const char kViewerPage[];
}  // namespace internal

}  // namespace attnscope::engine
