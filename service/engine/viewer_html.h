// The attention viewer: one self-contained HTML page (plain JavaScript and
// canvas, no network) with a prompt's attention weights embedded compactly,
// where a person sees every head at a glance (model view), opens one head's
// matrix, hovers a query token to see which keys it reads (matrix row, a
// list and token-to-token lines) and that token's z, norm and entropy.
// Torch-free.
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
  // Per-token statistics shown on hover; each empty (not shown) or [T].
  std::vector<double> z;             // log-MAD z-score of the received attention
  std::vector<double> max_norm;      // max hidden-state norm over the states
  std::vector<double> entropy_nats;  // next-token entropy
  std::vector<int64_t> sinks;        // anomalous sink positions (marked on hover)
};

// Largest quantisation error of a weight in the page, relative to the
// largest weight of its row (see RenderViewerHtml).
constexpr double kViewerRowQuantisationError = 1.0 / 510.0;

// The page. Embedded data (JSON in <script id="attnscope-data">): "title",
// "prompt", "tokens" [T], "layers", "heads", "format" ("q8row-deflate-b64"),
// "attn" [L*H] (head l*H+h at l*H+h), "sink" [L][H] (A[T-1,0]),
// "thumb_size" N, "thumbs", "z", "norm", "entropy" ([T] or absent), "sinks".
// Each "attn" entry is base64 of a zlib stream of: the causal lower triangle
// row by row (row i: keys 0..i) as bytes q[i][j] = round(255 A[i][j] / m_i)
// with m_i = max_j A[i][j], then the T row maxima m_i as little-endian
// float32. The page decodes a head only when it is shown, as q * m_i / 255:
// the error of a weight is at most m_i * kViewerRowQuantisationError (plus
// float rounding). "thumbs" is base64 of L*H N x N bytes, N = min(T, 48):
// round(255 * max of A over the block of rows and keys) per cell.
// Opening the page as FILE#test=l,h,i selects head (l, h) through the
// controls, moves the mouse over row i of the matrix canvas and writes what is
// drawn as JSON into <pre id="test-output"> (see the test hook in the page).
// InvalidArgument when a dimension is < 1, tokens.size() != T, the span's
// size is not L*H*T*T or a per-token vector is neither empty nor [T].
absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data);

// Renders and writes the page; the errors of RenderViewerHtml, and Internal
// naming the path when it cannot be written.
absl::Status WriteViewerHtml(const std::string& path, const ViewerData& data);

namespace internal {
// The page template: "__ATTNSCOPE_DATA__" is replaced by the JSON data, and
// "__ATTNSCOPE_SCRIPT__" by kViewerScript.
extern const char kViewerPage[];
extern const char kViewerScript[];
}  // namespace internal

}  // namespace attnscope::engine
