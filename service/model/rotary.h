// Internal to the model library: rotary position embedding tables and their
// application, computed in float32 exactly as Hugging Face's
// modeling_rope_utils does for each scaling kind.
#pragma once

#include <ATen/ATen.h>

#include "service/model/decoder_spec.h"

namespace attnscope::model {

// inv_freq (rotary_dim / 2) for a forward pass whose longest position + 1
// is `seq_len` (dynamic and longrope depend on it).
at::Tensor RotaryInvFreq(const RopeSpec& rope, int64_t seq_len);

struct RotaryTables {
  at::Tensor cos, sin;  // (T, rotary_dim), already multiplied by attention_scaling
};

// Tables for positions first .. first + count - 1.
RotaryTables MakeRotaryTables(const RopeSpec& rope, int64_t first, int64_t count);

// x is (B, heads, T, d): rotates its first rotary_dim dims (rotate_half:
// dim i pairs with i + rotary_dim / 2), the rest passes through.
at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& tables);

}  // namespace attnscope::model
