// How many query rows of one layer's attention the runtime computes at once.
// Torch-free, so that the CLI, the server and tests can reason about it.
#pragma once

#include <cstdint>

namespace attnscope::model {

// The automatic choice keeps one block's float32 probabilities (sequences x
// heads x rows x keys x 4 bytes) under this many bytes: 8 MiB, so a long
// prompt's attention costs memory linear in T instead of H x T x T per layer
// (and a layer at T = 1024 with 12 heads holds 7.5 MiB of it, not 48).
inline constexpr int64_t kAutoAttentionBlockBytes = int64_t{8} << 20;
// Blocks of fewer rows pay BLAS's packing of the keys once per few rows: the
// automatic choice takes up to 4 x the budget to keep this many rows.
inline constexpr int64_t kAutoMinBlockRows = 64;
// Nor more rows than this: a block of 128 rows is 256 KiB of probabilities
// per head at T = 512 and 512 KiB at T = 1024 (about one core's L2), where
// GPT-2 small's analysis is fastest (perf_compare_bench --sweep-blocks; the
// measurements: docs/performance-history.md, "Measurements behind choices
// in the code"). Smaller blocks also skip more of the causal mask's zeros.
inline constexpr int64_t kAutoMaxBlockRows = 128;

// The query rows per block for a layer of `heads` attention maps (sequences
// x query heads) over `queries` query rows and `keys` keys.
// requested > 0: min(requested, queries) (requested >= queries: whole layers).
// requested == 0 (automatic): the largest multiple of 16 rows (at least 16)
// whose heads x rows x keys float32 values fit in `budget_bytes`, raised to
// up to kAutoMinBlockRows rows where they fit in 4 x `budget_bytes`, and at
// most kAutoMaxBlockRows (or `queries` when fewer: a prompt of up to 128
// tokens goes in one block). Every argument but `requested` is >= 1;
// requested < 0 is treated as 0.
int64_t QueryBlockRows(int64_t requested, int64_t heads, int64_t queries, int64_t keys,
                       int64_t budget_bytes = kAutoAttentionBlockBytes);

}  // namespace attnscope::model
