// The attention viewer: one self-contained HTML page (plain JavaScript and
// canvas, no network) with a prompt's attention weights embedded compactly,
// where a person sees every head at a glance (model view), opens one head's
// matrix, hovers a query token to see which keys it reads (matrix row, a
// list and token-to-token lines) and that token's z, norm and entropy.
// Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "service/engine/tensor_pieces.h"

namespace attnscope::engine {

struct ViewerData {
  std::string title;        // shown in the header (e.g. the model directory's name)
  std::string prompt_text;  // shown under the title; may be empty
  std::vector<std::string> tokens;  // T labels (invalid UTF-8 is replaced)
  int64_t num_layers = 0;   // L
  int64_t num_heads = 0;    // H
  int64_t num_tokens = 0;   // T
  // (L, H, T, T), rows = queries: for RenderViewerHtml; a ViewerPageBuilder
  // takes them as pieces instead.
  absl::Span<const float> attentions;
  // Per-token statistics shown on hover; each empty (not shown) or [T].
  std::vector<double> z;             // log-MAD z-score of the received attention
  std::vector<double> max_norm;      // max hidden-state norm over the states
  std::vector<double> entropy_nats;  // next-token entropy
  std::vector<int64_t> sinks;        // anomalous sink positions (marked on hover)
};

// Largest quantisation error of a weight in the page, relative to the
// largest weight of its row (see RenderViewerHtml).
constexpr double kViewerRowQuantisationError = 1.0 / 510.0;

// The most tokens a page holds (its keys are 16-bit).
constexpr int64_t kViewerMaxTokens = 16384;

// The page. Embedded data (JSON in <script id="attnscope-data">): "title",
// "prompt", "tokens" [T], "layers" L' and "heads" H' (how many the page
// holds), "layer_ids" [L'] and "head_ids" [H'] (their indices in the model),
// "model_layers" L, "model_heads" H, "format" ("q8row-sparse-deflate-b64"),
// "row_keys" K, "truncated_rows" (rows that kept only K keys),
// "attn" [L'*H'] (the page's head (l, h) at l*H'+h), "sink" [L'][H'] (A[T-1,0]),
// "thumb_size" N, "thumbs", "z", "norm", "entropy" ([T] or absent), "sinks".
// Each "attn" entry is base64 of a zlib stream of the causal lower triangle
// row by row, each weight as the level q[i][j] = round(255 A[i][j] / m_i)
// with m_i = max_j A[i][j], then the T row maxima m_i as little-endian
// float32. A row is a flag byte then either (0, dense) the levels of keys
// 0..i, or (1, sparse) a uint16 count c, c uint16 keys ascending and their c
// levels (the other keys' levels are 0): whichever is smaller, sparse holding
// at most K keys, so that a head takes at most T (3K + 3) bytes whatever the
// weights. The page decodes a head only when it is shown, as q * m_i / 255:
// the error of a weight is at most m_i * kViewerRowQuantisationError (plus
// float rounding), except in a truncated row (more than K nonzero levels and
// longer than 3K + 2 keys), where the keys outside its K largest weights
// read 0 (each is at most the K-th largest weight, so at most 1/K).
// "thumbs" is base64 of L*H N x N bytes, N = min(T, 48):
// round(255 * max of A over the block of rows and keys) per cell.
// Opening the page as FILE#test=l,h,i selects head (l, h) (model indices) through the
// controls, moves the mouse over row i of the matrix canvas and writes what is
// drawn as JSON into <pre id="test-output"> (see the test hook in the page).
// InvalidArgument when a dimension is < 1, tokens.size() != T, the span's
// size is not L*H*T*T or a per-token vector is neither empty nor [T].
// RenderViewerHtml keeps every key (K = T).
absl::StatusOr<std::string> RenderViewerHtml(const ViewerData& data);

// Renders and writes the page; the errors of RenderViewerHtml, and Internal
// naming the path when it cannot be written.
absl::Status WriteViewerHtml(const std::string& path, const ViewerData& data);

// The most bytes a page of `heads` heads at T tokens and K keys per sparse
// row (row_keys <= 0: T) can take (the encoded rows before compression, in
// base64, with the thumbnails): what a cap on the page's size is checked
// against before any work, whatever the weights.
int64_t ViewerPageBound(int64_t heads, int64_t num_tokens, int64_t row_keys);

// The largest K <= T whose page bound is at most `max_bytes` (T when every
// key fits); 0 when not even one key a row does.
int64_t ViewerRowKeysFor(int64_t heads, int64_t num_tokens, int64_t max_bytes);

// The page built piece by piece: each selected head's rows are quantised and
// compressed as they arrive (memory: the compressed heads, at most
// ViewerPageBound), then Write adds the rest of ViewerData (its
// `attentions` unused; num_layers and num_heads are the model's). Sparse
// rows keep at most `row_keys` keys (<= 0: every key).
class ViewerPageBuilder : public TensorPieceSink {
 public:
  ViewerPageBuilder(HeadSelection selection, int64_t num_tokens, int64_t row_keys);
  ~ViewerPageBuilder() override;
  // Attention pieces of selected heads (float32 or float16, any byte
  // boundaries, each head's rows in order); other pieces are ignored.
  // InvalidArgument for a piece of another T or out of order.
  absl::Status Add(const TensorPiece& piece) override;
  // InvalidArgument as RenderViewerHtml, and FailedPrecondition naming a
  // head whose rows did not all arrive.
  absl::StatusOr<std::string> Render(const ViewerData& data);
  absl::Status Write(const std::string& path, const ViewerData& data);

  ViewerPageBuilder(const ViewerPageBuilder&) = delete;
  ViewerPageBuilder& operator=(const ViewerPageBuilder&) = delete;

 private:
  struct Head;
  absl::Status AddRow(Head& head, const float* row);
  absl::Status Emit(const ViewerData& data, const std::function<void(const std::string&)>& out);
  HeadSelection selection_;
  int64_t tokens_;
  int64_t row_keys_;
  int64_t truncated_rows_ = 0;
  std::vector<std::unique_ptr<Head>> heads_;
  std::vector<int64_t> row_cell_;  // thumbnail cell of each row (and key)
};

// A JSON document's text made safe inside a <script> element: '<' (which
// only occurs inside JSON strings) written as \u003c, which means the same,
// so that no "</script" or "<!--" in a token can end or confuse the element.
std::string EscapeJsonForScript(const std::string& json);

namespace internal {
// The page template: "__ATTNSCOPE_DATA__" is replaced by the JSON data, and
// "__ATTNSCOPE_SCRIPT__" by kViewerScript.
extern const char kViewerPage[];
extern const char kViewerScript[];
}  // namespace internal

}  // namespace attnscope::engine
