// Fuzz target: config.json, for every family ParseModelConfig knows (the seed
// corpus holds one config per model_type). A config that parses must
// describe a model the runtime can build: positive sizes, query heads a
// multiple of the key/value heads, one attention window per layer, a rotary
// width that fits the head.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "service/model/model_config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = attnscope::model::ParseModelConfig(text, "config.json");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().message().rfind("config.json", 0) == 0,
               parsed.status().ToString());
    return 0;
  }
  const attnscope::model::ModelConfig& c = *parsed;
  const std::string type = c.model_type;
  FUZZ_CHECK(c.num_layers > 0 && c.num_heads > 0 && c.num_kv_heads > 0, type);
  FUZZ_CHECK(c.hidden_size > 0 && c.head_dim > 0 && c.vocab_size > 0, type);
  FUZZ_CHECK(c.max_positions > 0 && c.intermediate_size > 0, type);
  FUZZ_CHECK(c.num_heads % c.num_kv_heads == 0, type);
  const auto& attention = c.decoder.attention;
  FUZZ_CHECK(attention.num_heads == c.num_heads && attention.head_dim == c.head_dim, type);
  FUZZ_CHECK(attention.window.empty() ||
                 static_cast<int64_t>(attention.window.size()) == c.num_layers,
             type);
  const auto& rope = c.decoder.rope;
  if (rope.kind != attnscope::model::RopeKind::kNone) {
    FUZZ_CHECK(rope.rotary_dim > 0 && rope.rotary_dim % 2 == 0 && rope.rotary_dim <= c.head_dim,
               type);
  }
  if (rope.kind == attnscope::model::RopeKind::kLongRope) {
    const size_t half = static_cast<size_t>(rope.rotary_dim / 2);
    FUZZ_CHECK(rope.short_factor.size() == half && rope.long_factor.size() == half, type);
  }
  return 0;
}
