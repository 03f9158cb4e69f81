// attnscope models --model DIR reads config.json, the checkpoint's headers
// and the tokenizer, never the weights: at real size it answers at once, in
// a few hundred MB, and a directory it cannot describe fails before any
// weight is read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli/run_cli.h"
#include "tests/common/real_checkpoint.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using ::testing::HasSubstr;
using testing::RunCli;

std::string RealCheckpointDir(const std::string& model, const std::string& tokenizer) {
  const std::string dir = test::UniqueTempPath(model);
  std::filesystem::create_directories(dir);
  testing::RealCheckpointOptions options;
  options.shard_bytes = int64_t{5} << 30;
  options.sparse = true;
  EXPECT_GT(testing::WriteRealCheckpoint(model, dir, options), 0);
  if (!tokenizer.empty()) {
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(
          std::string(ATTNSCOPE_TEST_DATA_DIR) + "/tokenizers/" + tokenizer + "/" + file,
          dir + "/" + file);
    }
  }
  return dir;
}

// The Llama-3.1-8B shape, 16 GB of BF16 in four shards written as holes:
// loading its weights would need 16-32 GB; describing it needs its config.
TEST(ModelsCliTest, DescribesAn8BModelWithoutReadingItsWeights) {
  const std::string dir = RealCheckpointDir("Llama-3.1-8B", "llama3");
  const auto r = RunCli({"models", "--model", dir, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json models = nlohmann::json::parse(r.out);
  ASSERT_EQ(models.size(), 1u) << r.out;
  const nlohmann::json& m = models[0];
  EXPECT_EQ(m["name"], std::filesystem::path(dir).filename().string());
  EXPECT_EQ(m["architecture"], "llama");
  EXPECT_EQ(m["num_layers"], 32);
  EXPECT_EQ(m["num_heads"], 32);
  EXPECT_EQ(m["num_kv_heads"], 8);
  EXPECT_EQ(m["hidden_size"], 4096);
  EXPECT_EQ(m["intermediate_size"], 14336);
  EXPECT_EQ(m["vocab_size"], 128256);
  EXPECT_EQ(m["rope_kind"], "llama3");
  EXPECT_EQ(m["dtype"], "bfloat16");
  EXPECT_EQ(m["has_tokenizer"], true);
  // The process (libtorch's libraries, the 9 MB tokenizer) against 15 GiB of
  // weights: anything that read them would be far above this.
  ASSERT_GT(r.peak_rss_kib, 0);
  EXPECT_LT(r.peak_rss_kib, 1 << 20) << "models --model peaked at " << r.peak_rss_kib << " KiB";
}

// `models --model` and `--version` are answered by the front binary, which
// never loads libtorch (whose start alone takes ~0.7 s); every other command
// runs attnscope-engine, which does. The dynamic loader lists what it loads
// (LD_DEBUG=files, on stderr).
TEST(ModelsCliTest, TheFrontAnswersWithoutLoadingLibtorch) {
  auto loaded = [](const std::vector<std::string>& args) {
    setenv("LD_DEBUG", "files", 1);
    const auto r = RunCli(args);
    unsetenv("LD_DEBUG");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  EXPECT_THAT(loaded({"models", "--model", std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"}),
              ::testing::Not(HasSubstr("libtorch_cpu")));
  EXPECT_THAT(loaded({"--version"}), ::testing::Not(HasSubstr("libtorch_cpu")));
  // The check can fail: a command that needs the model runtime loads it.
  EXPECT_THAT(loaded({"tokenize", "--text", "hi"}), HasSubstr("libtorch_cpu"));
}

TEST(ModelsCliTest, ABrokenTokenizerIsAWarningAndMissingWeightsAnError) {
  const std::string dir = RealCheckpointDir("Qwen2.5-0.5B", "");
  std::ofstream(dir + "/tokenizer.json") << "{\"model\": ";
  const auto broken = RunCli({"models", "--model", dir});
  EXPECT_EQ(broken.exit_code, 0) << broken.err;
  EXPECT_THAT(broken.err, HasSubstr("warning: the tokenizer does not load"));
  EXPECT_THAT(broken.err, HasSubstr("tokenizer.json"));
  EXPECT_THAT(broken.out, HasSubstr("qwen2"));
  EXPECT_THAT(broken.out, ::testing::EndsWith(" no\n"));

  std::filesystem::remove(dir + "/model.safetensors");
  const auto missing = RunCli({"models", "--model", dir});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr(dir));
  EXPECT_THAT(missing.err, HasSubstr("model.safetensors"));
  EXPECT_TRUE(missing.out.empty()) << missing.out;
}

}  // namespace
}  // namespace attnscope
