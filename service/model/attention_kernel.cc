#include "service/model/attention_kernel.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "service/core/vector_math.h"

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
  const auto rows = static_cast<int>(a.rows), d = static_cast<int>(a.head_dim);
  // scores (rows, keys) = q (rows, d) . k[key_lo..]^T, scaled inside the GEMM
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, static_cast<int>(keys), d, a.scale,
              a.q, static_cast<int>(a.q_ld), a.k + key_lo * a.k_ld, static_cast<int>(a.k_ld),
              0.0f, a.probs + key_lo, static_cast<int>(a.probs_ld));
  for (int64_t r = 0; r < a.rows; ++r) {
    float* row = a.probs + r * a.probs_ld;
    const Visible v = VisibleKeys(a, a.first_position + r);
    if (a.softcap > 0) {
      // Gemma-2 only: tanh has no vector kernel here.
      for (int64_t j = v.lo; j < v.hi; ++j) row[j] = std::tanh(row[j] / a.softcap) * a.softcap;
    }
    vmath::Softmax(row + v.lo, v.hi - v.lo, row + v.lo);
    std::memset(row, 0, static_cast<size_t>(v.lo) * sizeof(float));
    std::memset(row + v.hi, 0, static_cast<size_t>(a.num_keys - v.hi) * sizeof(float));
  }
  // out (rows, d) = probs[:, key_lo..] (rows, keys) . v[key_lo..] (keys, d);
  // hidden keys inside that range have probability exactly 0.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, static_cast<int>(keys), 1.0f,
              a.probs + key_lo, static_cast<int>(a.probs_ld), a.v + key_lo * a.v_ld,
              static_cast<int>(a.v_ld), 0.0f, a.out, static_cast<int>(a.out_ld));
}

}  // namespace attnscope::model
