// Internal to the model library: causal attention of one (sequence, head)
// for one block of query rows, on raw float32 arrays on the CPU: two
// products (BLAS's sgemm, or the own kernel on keys and values packed once
// per layer) and a softmax over each row's visible keys only. Torch-free.
#pragma once

#include <cstdint>

namespace attnscope::model {

struct HeadAttentionArgs {
  const float* q = nullptr;  // rows x d; row r at q + r * q_ld
  int64_t q_ld = 0;
  const float* k = nullptr;  // num_keys x d; key j at k + j * k_ld
  int64_t k_ld = 0;
  const float* v = nullptr;  // num_keys x d
  int64_t v_ld = 0;
  float* out = nullptr;      // rows x d: the head's output for these rows
  int64_t out_ld = 0;
  float* probs = nullptr;    // rows x num_keys written (row stride probs_ld)
  int64_t probs_ld = 0;
  double* row_entropy = nullptr;  // non-null: rows entropies written (vmath::SoftmaxEntropy)
  int64_t rows = 0;
  int64_t head_dim = 0;
  int64_t num_keys = 0;
  // Position of the first query row; row r sees keys up to first_position + r.
  int64_t first_position = 0;
  int64_t window = 0;  // > 0: row at position p sees keys p - window + 1 .. p only
  float scale = 1.0f;  // scores are (q . k) * scale
  float softcap = 0.0f;  // > 0: scores become tanh(s / softcap) * softcap
  // Both non-null: the keys and values packed once for the layer
  // (PackKeyPanels and PackValuePanels of panel_gemm.h over all num_keys
  // keys), and both products on the own kernel instead of BLAS.
  const float* key_panels = nullptr;
  const float* value_panels = nullptr;
};

// probs[r][j] = softmax over the visible keys of the scaled (soft-capped)
// scores, exactly 0 for hidden keys; out = probs . v; with row_entropy,
// row_entropy[r] = -sum_j probs[r][j] log probs[r][j] from the softmax. Scores are computed
// only for the keys some row of the block can see. Single-threaded BLAS
// calls when run inside a parallel region (OpenBLAS then uses one thread).
void HeadAttention(const HeadAttentionArgs& a);

}  // namespace attnscope::model
