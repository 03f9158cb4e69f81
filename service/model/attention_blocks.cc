#include "service/model/attention_blocks.h"

#include <algorithm>

namespace attnscope::model {

int64_t QueryBlockRows(int64_t requested, int64_t heads, int64_t queries, int64_t keys,
                       int64_t budget_bytes) {
  if (requested > 0) return std::min(requested, queries);
  const int64_t row_bytes = heads * keys * static_cast<int64_t>(sizeof(float));
  // Multiples of 16 rows keep the block's matrix products on BLAS's fast
  // paths; below 16 rows the per-block overhead outweighs the memory saved.
  constexpr int64_t kGranule = 16;
  const auto rows_within = [&](int64_t bytes) {
    return std::max(kGranule, bytes / row_bytes / kGranule * kGranule);
  };
  const int64_t rows = std::max(rows_within(budget_bytes),
                                std::min(kAutoMinBlockRows, rows_within(4 * budget_bytes)));
  return std::min({rows, kAutoMaxBlockRows, queries});
}

}  // namespace attnscope::model
