#include "service/cli/model_listing.h"

#include <algorithm>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "service/core/safetensors.h"
#include "service/core/status_macros.h"
#include "service/model/default_model.h"
#include "service/model/model_config.h"
#include "service/tokenizer/sentencepiece_tokenizer.h"

namespace attnscope::cli {
namespace {

// The last path component of a directory ("models/tiny-gpt2/" -> "tiny-gpt2").
std::string DirectoryName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

}  // namespace

const char kModelsHelp[] = R"(Usage: attnscope [--server HOST:PORT] models [--model DIR] [--json]

Lists models with their family, layers, heads, key/value heads, head width,
width, vocabulary, positions, rotary kind, sliding window, checkpoint dtype
and whether they have a tokenizer (--json adds the MLP width, rope theta,
rotary dims, windowed layers, norm kind and head tying): the model in
--model DIR (default: the bundled tiny-gpt2, named after its directory), or
with --server every model the server has loaded (the first is its default).

  --model DIR   local model directory (not with --server)
  --json        a JSON array of objects with the same fields
)";

nlohmann::json ModelsJson(const std::vector<rpc::ModelDescription>& models) {
  nlohmann::json out = nlohmann::json::array();
  for (const rpc::ModelDescription& m : models) {
    out.push_back({{"name", m.name},
                   {"architecture", m.architecture},
                   {"num_layers", m.num_layers},
                   {"num_heads", m.num_heads},
                   {"num_kv_heads", m.num_kv_heads},
                   {"hidden_size", m.hidden_size},
                   {"vocab_size", m.vocab_size},
                   {"max_positions", m.max_positions},
                   {"dtype", m.dtype},
                   {"has_tokenizer", m.has_tokenizer},
                   {"head_dim", m.head_dim},
                   {"intermediate_size", m.intermediate_size},
                   {"rope_kind", m.rope_kind},
                   {"rope_theta", m.rope_theta},
                   {"rotary_dim", m.rotary_dim},
                   {"sliding_window", m.sliding_window},
                   {"sliding_layers", m.sliding_layers},
                   {"norm", m.norm},
                   {"tied_head", m.tied_head}});
  }
  return out;
}

std::string ModelsTable(const std::vector<rpc::ModelDescription>& models) {
  size_t width = 4;
  for (const rpc::ModelDescription& m : models) width = std::max(width, m.name.size());
  const int w = static_cast<int>(width);
  std::string out = absl::StrFormat(
      "%-*s  %-8s %6s %5s %8s %8s %5s %6s %9s %-8s %6s  %-8s %s\n", w, "NAME", "FAMILY", "LAYERS",
      "HEADS", "KV_HEADS", "HEAD_DIM", "WIDTH", "VOCAB", "POSITIONS", "ROPE", "WINDOW", "DTYPE",
      "TOKENIZER");
  for (const rpc::ModelDescription& m : models) {
    const std::string window =
        m.sliding_window > 0 ? absl::StrFormat("%d", m.sliding_window) : std::string("-");
    out += absl::StrFormat("%-*s  %-8s %6d %5d %8d %8d %5d %6d %9d %-8s %6s  %-8s %s\n", w,
                           m.name, m.architecture, m.num_layers, m.num_heads, m.num_kv_heads,
                           m.head_dim, m.hidden_size, m.vocab_size, m.max_positions, m.rope_kind,
                           window, m.dtype, m.has_tokenizer ? "yes" : "no");
  }
  return out;
}


// A local model directory described without loading its weights: its
// config.json, the headers of its safetensors files (a directory without
// weights, or with a broken file, fails here in a fraction of a second) and
// its tokenizer (whose error, when it has one that does not load, is a
// warning: the model still serves id prompts).
absl::StatusOr<rpc::ModelDescription> DescribeModelDirectory(const std::string& dir) {
  ATTNSCOPE_ASSIGN_OR_RETURN(model::ModelConfig config, model::LoadModelConfig(dir));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> checkpoint,
                             SafetensorsCheckpoint::OpenDirectory(dir));
  auto tokenizer = tokenizer::LoadTokenizer(dir);
  if (!tokenizer.ok() && !absl::IsNotFound(tokenizer.status())) {
    std::cerr << "attnscope models: warning: the tokenizer does not load (prompts must be "
                 "token ids): "
              << tokenizer.status().message() << "\n";
  }
  return rpc::DescribeModel(DirectoryName(dir), config, tokenizer.ok());
}

std::vector<FlagSpec> ModelsFlagSpecs() { return {{"model"}, {"json", false}}; }

int RunLocalModels(const Flags& flags) {
  auto described = DescribeModelDirectory(flags.Get("model", model::DefaultModelDirectory()));
  if (!described.ok()) {
    std::cerr << "attnscope models: " << described.status().message() << "\n";
    return 1;
  }
  const std::vector<rpc::ModelDescription> models = {*described};
  std::cout << (flags.Has("json") ? ModelsJson(models).dump() + "\n" : ModelsTable(models));
  return 0;
}

}  // namespace attnscope::cli
