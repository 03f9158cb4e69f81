// `analyze --export` and `--viewer` with selections: --attention-layers,
// --attention-heads and --attention-dtype float16 write the chosen heads of
// the full export (in half precision, rounded to nearest); --viewer-layers and
// --viewer-heads put the chosen heads on the page, as the whole page holds
// them; --viewer-max-mb refuses a page that cannot fit before the pass; every
// flag without its file, a bad list and an index the model lacks is a usage
// error. On the bundled model (6 layers x 6 heads).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/core/safetensors.h"
#include "tests/cli/run_cli.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::RunCli;

constexpr char kPrompt[] = "The cat sat on the mat. Then the cat slept on the mat until noon.";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json PageData(const std::string& path) {
  const std::string page = Slurp(path);
  const std::string open = R"(<script type="application/json" id="attnscope-data">)";
  const size_t begin = page.find(open);
  if (begin == std::string::npos) return json();
  const size_t start = begin + open.size();
  return json::parse(page.substr(start, page.find("</script>", start) - start));
}

class TensorOutputsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::UniqueTempPath("tensor-outputs"));
    std::filesystem::create_directories(*dir_);
    auto r = RunCli({"analyze", "--text", kPrompt, "--export", Path("full.safetensors"),
                     "--viewer", Path("full.html")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  static std::string* dir_;
};
std::string* TensorOutputsTest::dir_ = nullptr;

TEST_F(TensorOutputsTest, ExportHoldsTheSelectedHeadsInHalfPrecision) {
  auto r = RunCli({"analyze", "--text", kPrompt, "--export", Path("some.safetensors"),
                   "--attention-layers", "1,4-5", "--attention-heads", "3,0",
                   "--attention-dtype", "float16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto full = SafetensorsFile::Open(Path("full.safetensors"));
  auto some = SafetensorsFile::Open(Path("some.safetensors"));
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(some.ok()) << some.status();
  const TensorRef* a = (*full)->Find("attentions");
  const TensorRef* b = (*some)->Find("attentions");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->shape.size(), 4u);
  const int64_t H = a->shape[1], T = a->shape[2];
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3, 2, T, T}));
  EXPECT_EQ((*some)->metadata().at("attention_layers"), "1,4-5");
  EXPECT_EQ((*some)->metadata().at("attention_heads"), "0,3");
  EXPECT_EQ((*full)->metadata().at("attention_layers"), "0-5");
  const std::vector<int64_t> layers = {1, 4, 5}, heads = {0, 3};
  int64_t compared = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (size_t h = 0; h < heads.size(); ++h) {
      for (int64_t e = 0; e < T * T; ++e) {
        float want;
        std::memcpy(&want, a->data + 4 * ((layers[l] * H + heads[h]) * T * T + e), 4);
        uint16_t bits;
        std::memcpy(&bits, b->data + 2 * ((static_cast<int64_t>(l * heads.size() + h)) * T * T + e), 2);
        const float got = HalfToFloat(bits);
        // Round to nearest half: within half an ulp (2^-11 relative), or the
        // subnormal step.
        if (!(std::fabs(got - want) <= std::fabs(want) * 0x1p-11f + 0x1p-25f)) {
          ADD_FAILURE() << "head " << layers[l] << "." << heads[h] << " element " << e << ": "
                        << got << " vs " << want;
          return;
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 6 * T * T);
  for (const char* name : {"hidden_states", "logits", "input_ids"}) {
    const TensorRef* x = (*full)->Find(name);
    const TensorRef* y = (*some)->Find(name);
    ASSERT_TRUE(x != nullptr && y != nullptr) << name;
    EXPECT_EQ(x->shape, y->shape) << name;
    EXPECT_TRUE(x->nbytes == y->nbytes && std::memcmp(x->data, y->data, x->nbytes) == 0)
        << name << " differ";
  }
}

TEST_F(TensorOutputsTest, ViewerHoldsTheSelectedHeadsAsTheWholePageDoes) {
  auto r = RunCli({"analyze", "--text", kPrompt, "--viewer", Path("some.html"),
                   "--viewer-layers", "2", "--viewer-heads", "4,1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json full = PageData(Path("full.html")), some = PageData(Path("some.html"));
  ASSERT_TRUE(full.is_object() && some.is_object());
  EXPECT_EQ(some["layer_ids"], json({2}));
  EXPECT_EQ(some["head_ids"], json({1, 4}));
  EXPECT_EQ(some["model_layers"], 6);
  EXPECT_EQ(some["model_heads"], 6);
  ASSERT_EQ(some["attn"].size(), 2u);
  EXPECT_EQ(some["attn"][0], full["attn"][2 * 6 + 1]);
  EXPECT_EQ(some["attn"][1], full["attn"][2 * 6 + 4]);
  EXPECT_EQ(some["truncated_rows"], 0);
  EXPECT_LT(std::filesystem::file_size(Path("some.html")),
            std::filesystem::file_size(Path("full.html")));
}

TEST_F(TensorOutputsTest, ViewerCapRefusesBeforeThePassAndNamesTheFlags) {
  std::string ids;
  for (int i = 0; i < 500; ++i) ids += (i ? "," : "") + std::to_string(100 + i % 300);
  auto r = RunCli({"analyze", "--ids", ids, "--viewer", Path("capped.html"), "--viewer-max-mb",
                   "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--viewer-max-mb 1"));
  EXPECT_THAT(r.err, HasSubstr("--viewer-layers"));
  EXPECT_THAT(r.err, HasSubstr("6 layers x 6 heads at 500 tokens"));
  EXPECT_FALSE(std::filesystem::exists(Path("capped.html")));
  // One head fits, with every weight.
  auto one = RunCli({"analyze", "--ids", ids, "--viewer", Path("capped.html"), "--viewer-max-mb",
                     "1", "--viewer-layers", "5", "--viewer-heads", "0"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const json page = PageData(Path("capped.html"));
  EXPECT_EQ(page["row_keys"], 500);
  EXPECT_LE(std::filesystem::file_size(Path("capped.html")), 1000000u);
}

TEST_F(TensorOutputsTest, SelectionsWithoutTheirFileOrOutsideTheModelAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string out = Path("never.safetensors"), page = Path("never.html");
  const std::vector<Case> cases = {
      {{"--attention-heads", "0"}, "--attention-heads selects what --export writes"},
      {{"--attention-dtype", "float16"}, "give --export FILE too"},
      {{"--viewer-layers", "1"}, "--viewer-layers selects what --viewer writes"},
      {{"--viewer-max-mb", "5", "--export", out}, "give --viewer FILE too"},
      {{"--export", out, "--attention-dtype", "bf16"}, "--attention-dtype must be float32 or float16"},
      {{"--export", out, "--attention-layers", "3-1"}, "--attention-layers"},
      {{"--export", out, "--attention-layers", "1,,2"}, "--attention-layers"},
      {{"--export", out, "--attention-heads", "-1"}, "--attention-heads"},
      {{"--export", out, "--attention-layers", "6"}, "--attention-layers"},
      {{"--viewer", page, "--viewer-heads", "0,6"}, "--viewer-heads"},
      {{"--viewer", page, "--viewer-max-mb", "0"}, "--viewer-max-mb"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"analyze", "--text", "hi"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.args[1] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args[0] << " " << c.args[1];
    EXPECT_FALSE(std::filesystem::exists(out) || std::filesystem::exists(page));
  }
  // An index outside the model says how many it has.
  auto r = RunCli({"analyze", "--text", "hi", "--viewer", page, "--viewer-heads", "0,6"});
  EXPECT_THAT(r.err, HasSubstr("6 heads"));
}

}  // namespace
}  // namespace attnscope
