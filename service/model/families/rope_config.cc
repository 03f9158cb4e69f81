// rope_theta + rope_scaling (transformers 4.x, "type" or "rope_type") and v5
// rope_parameters, read into a RopeSpec.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/model/families/families.h"

namespace attnscope::model::families {
namespace {

using nlohmann::json;

absl::StatusOr<RopeKind> ParseKind(const ConfigReader& c, const std::string& key,
                                   const json& value) {
  if (!value.is_string()) return c.Unsupported(key, value, "a string");
  const std::string name = value.get<std::string>();
  if (name == "default") return RopeKind::kDefault;
  if (name == "linear") return RopeKind::kLinear;
  if (name == "dynamic") return RopeKind::kDynamic;
  if (name == "llama3") return RopeKind::kLlama3;
  if (name == "yarn") return RopeKind::kYarn;
  if (name == "longrope" || name == "su") return RopeKind::kLongRope;
  return c.Unsupported(key, value, "default, linear, dynamic, llama3, yarn, longrope");
}

double YarnMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

absl::StatusOr<std::vector<double>> Factors(const ConfigReader& r, const char* key,
                                            int64_t expected) {
  if (!r.Has(key) || !r.json().at(key).is_array()) {
    return r.Invalid(absl::StrCat("longrope needs '", key, "', a list of ", expected, " numbers"));
  }
  std::vector<double> out;
  for (const json& v : r.json().at(key)) {
    if (!v.is_number()) return r.Invalid(absl::StrCat("'", key, "' holds a non-number"));
    out.push_back(v.get<double>());
  }
  if (static_cast<int64_t>(out.size()) != expected) {
    return r.Invalid(absl::StrCat("'", key, "' has ", out.size(), " numbers but the rotary dim ",
                                  2 * expected, " needs ", expected));
  }
  return out;
}

absl::Status ReadLlama3(const ConfigReader& s, RopeSpec& rope) {
  if (!s.Has("original_max_position_embeddings")) {
    return s.Invalid("llama3 scaling needs 'original_max_position_embeddings'");
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.low_freq_factor, s.Number("low_freq_factor", 1.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.high_freq_factor, s.Number("high_freq_factor", 4.0));
  if (!(rope.high_freq_factor > rope.low_freq_factor)) {
    return s.Invalid("'high_freq_factor' must exceed 'low_freq_factor'");
  }
  return absl::OkStatus();
}

absl::Status ReadYarn(const ConfigReader& s, double factor, RopeSpec& rope) {
  // transformers v5: an explicit factor wins over max / original.
  rope.factor = factor > 0 ? factor
                           : static_cast<double>(rope.max_positions) / rope.original_max_positions;
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.beta_fast, s.Number("beta_fast", 32.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.beta_slow, s.Number("beta_slow", 1.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.truncate, s.Bool("truncate", true));
  ATTNSCOPE_ASSIGN_OR_RETURN(double mscale, s.Number("mscale", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(double mscale_all, s.Number("mscale_all_dim", 0.0));
  const double fallback = (mscale > 0 && mscale_all > 0)
                              ? YarnMscale(rope.factor, mscale) / YarnMscale(rope.factor, mscale_all)
                              : YarnMscale(rope.factor, 1.0);
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.attention_scaling, s.Number("attention_factor", fallback));
  return absl::OkStatus();
}

absl::Status ReadLongRope(const ConfigReader& s, double factor, bool top_level_original,
                          RopeSpec& rope) {
  // A top-level original_max_position_embeddings (Phi-3) sets the factor.
  rope.factor = factor > 0 && !top_level_original
                    ? factor
                    : static_cast<double>(rope.max_positions) / rope.original_max_positions;
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.short_factor, Factors(s, "short_factor", rope.rotary_dim / 2));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.long_factor, Factors(s, "long_factor", rope.rotary_dim / 2));
  const double fallback =
      rope.factor <= 1.0
          ? 1.0
          : std::sqrt(1.0 + std::log(rope.factor) / std::log(rope.original_max_positions));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.attention_scaling, s.Number("attention_factor", fallback));
  return absl::OkStatus();
}

// Fills the kind-specific parameters from `s` (rope_scaling or
// rope_parameters); `c` is the top level.
absl::Status ReadScaling(const ConfigReader& c, const ConfigReader& s, RopeSpec& rope) {
  ATTNSCOPE_ASSIGN_OR_RETURN(int64_t top_original,
                             c.PositiveInt("original_max_position_embeddings", rope.max_positions));
  ATTNSCOPE_ASSIGN_OR_RETURN(double factor, s.Number("factor", 0.0));
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.original_max_positions,
                             s.PositiveInt("original_max_position_embeddings", top_original));
  switch (rope.kind) {
    case RopeKind::kNone:
    case RopeKind::kDefault:
      return absl::OkStatus();
    case RopeKind::kLinear:
    case RopeKind::kDynamic:
    case RopeKind::kLlama3:
      if (!(factor > 0)) return s.Invalid("'factor' must be a positive number");
      rope.factor = factor;
      return rope.kind == RopeKind::kLlama3 ? ReadLlama3(s, rope) : absl::OkStatus();
    case RopeKind::kYarn:
      return ReadYarn(s, factor, rope);
    case RopeKind::kLongRope:
      return ReadLongRope(s, factor, c.Has("original_max_position_embeddings"), rope);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> PartialRotaryFactor(const ConfigReader& c,
                                           const std::vector<const char*>& keys, double fallback) {
  for (const char* key : keys) {
    if (c.Has(key)) return c.Number(key, fallback);
  }
  if (c.Has("rope_parameters") && c.json().at("rope_parameters").is_object()) {
    const ConfigReader p = Nested(c, c.json().at("rope_parameters"), "rope_parameters");
    return p.Number("partial_rotary_factor", fallback);
  }
  return fallback;
}

absl::StatusOr<RopeSpec> ParseRope(const ConfigReader& c, double default_theta, int64_t head_dim,
                                   double partial_rotary_factor, int64_t max_positions) {
  RopeSpec rope;
  rope.kind = RopeKind::kDefault;
  rope.max_positions = max_positions;
  rope.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1) || rope.rotary_dim < 2 ||
      rope.rotary_dim % 2 != 0) {
    return c.Invalid(absl::StrCat("partial rotary factor ", partial_rotary_factor, " of head_dim ",
                                  head_dim, " gives ", rope.rotary_dim,
                                  " rotary dims; it must give an even number >= 2"));
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.theta, c.Number("rope_theta", default_theta));
  const char* key = c.Has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (!c.Has(key)) return rope;
  const json& value = c.json().at(key);
  if (!value.is_object()) return c.Unsupported(key, value, "an object or null");
  const ConfigReader s = Nested(c, value, key);
  if (!s.Has("rope_type") && !s.Has("type") && !s.Has("rope_theta") && !value.empty() &&
      value.begin()->is_object()) {
    return c.Unsupported(key, value, "one set of rotary parameters, not one per layer type");
  }
  ATTNSCOPE_ASSIGN_OR_RETURN(rope.theta, s.Number("rope_theta", rope.theta));
  const char* type_key = s.Has("rope_type") ? "rope_type" : "type";
  if (s.Has(type_key)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(rope.kind,
                               ParseKind(c, absl::StrCat(key, ".", type_key), value.at(type_key)));
  }
  if (!(rope.theta > 0)) return c.Invalid("'rope_theta' must be a positive number");
  ATTNSCOPE_RETURN_IF_ERROR(ReadScaling(c, s, rope));
  return rope;
}

}  // namespace attnscope::model::families
