#include "service/model/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "service/core/vector_math.h"
#include "service/model/gemm.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

// Keys [lo, hi) that the query at `position` sees.
struct Visible {
  int64_t lo = 0;
  int64_t hi = 0;
};

Visible VisibleKeys(const HeadAttentionArgs& a, int64_t position) {
  Visible v;
  v.hi = std::min(position + 1, a.num_keys);
  v.lo = a.window > 0 ? std::max<int64_t>(0, position - a.window + 1) : 0;
  return v;
}

}  // namespace

void HeadAttention(const HeadAttentionArgs& a) {
  // The block's rows see keys [first.lo, last.hi) between them: scores of
  // keys no row sees are never computed.
  const Visible first = VisibleKeys(a, a.first_position);
  const Visible last = VisibleKeys(a, a.first_position + a.rows - 1);
  const int64_t key_lo = first.lo, keys = last.hi - first.lo;
  const bool panels = a.key_panels != nullptr && a.value_panels != nullptr;
  // scores (rows, keys) = q (rows, d) . k[key_lo..]^T, scaled inside the
  // product. The panels start at a multiple of their width: the scores
  // before key_lo that this also writes are hidden keys, zeroed below.
  if (panels) {
    PanelScores(a.q, a.rows, a.q_ld, a.key_panels, a.head_dim, key_lo / kPanelWidth * kPanelWidth,
                last.hi, a.scale, a.probs, a.probs_ld);
  } else {
    Sgemm(/*b_transposed=*/true, a.rows, keys, a.head_dim, a.scale, a.q, a.q_ld,
          a.k + key_lo * a.k_ld, a.k_ld, a.probs + key_lo, a.probs_ld);
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    float* row = a.probs + r * a.probs_ld;
    const Visible v = VisibleKeys(a, a.first_position + r);
    if (a.softcap > 0) {
      // Gemma-2 only: tanh has no vector kernel here.
      for (int64_t j = v.lo; j < v.hi; ++j) row[j] = std::tanh(row[j] / a.softcap) * a.softcap;
    }
    if (a.row_entropy != nullptr) {
      a.row_entropy[r] = vmath::SoftmaxEntropy(row + v.lo, v.hi - v.lo, row + v.lo);
    } else {
      vmath::Softmax(row + v.lo, v.hi - v.lo, row + v.lo);
    }
    std::memset(row, 0, static_cast<size_t>(v.lo) * sizeof(float));
    std::memset(row + v.hi, 0, static_cast<size_t>(a.num_keys - v.hi) * sizeof(float));
  }
  // out (rows, d) = probs[:, key_lo..] (rows, keys) . v[key_lo..] (keys, d);
  // hidden keys inside that range have probability exactly 0.
  if (panels) {
    PanelWeightedValues(a.probs, a.rows, a.probs_ld, a.value_panels, a.num_keys, a.head_dim, key_lo,
                        last.hi, a.out, a.out_ld);
    return;
  }
  Sgemm(/*b_transposed=*/false, a.rows, a.head_dim, keys, 1.0f, a.probs + key_lo, a.probs_ld,
        a.v + key_lo * a.v_ld, a.v_ld, a.out, a.out_ld);
}

}  // namespace attnscope::model
