#include "service/model/rotary.h"

#include <algorithm>
#include <cmath>

namespace attnscope::model {
namespace {

// base ** (arange(0, dim, 2) / dim), in float32 like HF.
at::Tensor Powers(double base, int64_t dim) {
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / dim;
  return at::pow(at::Scalar(base), exponents);
}

at::Tensor Llama3(const RopeSpec& r, const at::Tensor& inv_freq) {
  const double old_len = static_cast<double>(r.original_max_positions);
  const double low_wavelen = old_len / r.low_freq_factor;
  const double high_wavelen = old_len / r.high_freq_factor;
  const at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor scaled = at::where(wavelen > low_wavelen, inv_freq / r.factor, inv_freq);
  const at::Tensor smooth =
      (at::reciprocal(wavelen) * old_len - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const at::Tensor medium = at::logical_not(wavelen < high_wavelen)
                                .logical_and(at::logical_not(wavelen > low_wavelen));
  return at::where(medium, smoothed, scaled);
}

double CorrectionDim(double rotations, int64_t dim, double base, int64_t max_positions) {
  return (dim * std::log(max_positions / (rotations * 2 * M_PI))) / (2 * std::log(base));
}

at::Tensor Yarn(const RopeSpec& r) {
  const int64_t dim = r.rotary_dim;
  const at::Tensor pos_freqs = Powers(r.theta, dim);
  const at::Tensor extrapolation = at::reciprocal(pos_freqs);
  const at::Tensor interpolation = at::reciprocal(pos_freqs * r.factor);
  double low = CorrectionDim(r.beta_fast, dim, r.theta, r.original_max_positions);
  double high = CorrectionDim(r.beta_slow, dim, r.theta, r.original_max_positions);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const at::Tensor ramp =
      ((at::arange(dim / 2, at::kFloat) - low) / (high - low)).clamp(0, 1);
  const at::Tensor extrapolation_factor = 1 - ramp;
  return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

}  // namespace

at::Tensor RotaryInvFreq(const RopeSpec& r, int64_t seq_len) {
  const int64_t dim = r.rotary_dim;
  switch (r.kind) {
    case RopeKind::kNone:
    case RopeKind::kDefault:
      return at::reciprocal(Powers(r.theta, dim));
    case RopeKind::kLinear:
      return at::reciprocal(Powers(r.theta, dim)) / r.factor;
    case RopeKind::kDynamic: {
      double base = r.theta;
      if (seq_len > r.max_positions) {
        const double ratio = r.factor * seq_len / r.max_positions - (r.factor - 1);
        base = r.theta * std::pow(ratio, static_cast<double>(dim) / (dim - 2));
      }
      return at::reciprocal(Powers(base, dim));
    }
    case RopeKind::kLlama3:
      return Llama3(r, at::reciprocal(Powers(r.theta, dim)));
    case RopeKind::kYarn:
      return Yarn(r);
    case RopeKind::kLongRope: {
      const std::vector<double>& ext =
          seq_len > r.original_max_positions ? r.long_factor : r.short_factor;
      const at::Tensor factors =
          at::tensor(at::ArrayRef<double>(ext), at::kDouble).to(at::kFloat);
      return at::reciprocal(factors * Powers(r.theta, dim));
    }
  }
  return at::reciprocal(Powers(r.theta, dim));
}

RotaryTables MakeRotaryTables(const RopeSpec& rope, int64_t first, int64_t count) {
  const at::Tensor inv_freq = RotaryInvFreq(rope, first + count);
  const at::Tensor positions = at::arange(first, first + count, at::kLong).to(at::kFloat);
  const at::Tensor freqs = at::outer(positions, inv_freq);  // (T, dim / 2)
  const at::Tensor emb = at::cat({freqs, freqs}, -1);       // (T, dim)
  RotaryTables t;
  t.cos = emb.cos();
  t.sin = emb.sin();
  if (rope.attention_scaling != 1.0) {
    t.cos = t.cos * rope.attention_scaling;
    t.sin = t.sin * rope.attention_scaling;
  }
  return t;
}

at::Tensor ApplyRotary(const at::Tensor& x, const RotaryTables& t) {
  const int64_t dim = t.cos.size(-1), half = dim / 2;
  const bool partial = dim < x.size(-1);
  const at::Tensor rot = partial ? x.narrow(-1, 0, dim) : x;
  const at::Tensor rotated = at::cat({-rot.narrow(-1, half, half), rot.narrow(-1, 0, half)}, -1);
  const at::Tensor out = rot * t.cos + rotated * t.sin;  // cos/sin broadcast over (B, heads)
  if (!partial) return out;
  return at::cat({out, x.narrow(-1, dim, x.size(-1) - dim)}, -1);
}

}  // namespace attnscope::model
