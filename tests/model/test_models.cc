#include "tests/model/test_models.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include "tests/common/float_compare.h"

namespace attnscope::model::testing {

std::string FixtureDir(const std::string& name) {
  return std::string(ATTNSCOPE_TEST_DATA_DIR) + "/models/" + name;
}

std::string BundledModelDir() { return std::string(ATTNSCOPE_MODELS_DIR) + "/tiny-gpt2"; }

Reference LoadReference(const std::string& fixture) {
  Reference r;
  auto file = SafetensorsFile::Open(FixtureDir(fixture) + "/reference.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return r;
  const SafetensorsFile& f = **file;
  r.input_ids = *ToInt64(*f.Find("input_ids"));
  r.attention_shape = f.Find("attentions")->shape;
  r.attentions = *ToFloat32(*f.Find("attentions"));
  r.hidden_states = *ToFloat32(*f.Find("hidden_states"));
  r.logits = *ToFloat32(*f.Find("logits"));
  return r;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  return test::MaxAbsDiff(a, b);  // NaN anywhere stays NaN
}

ScratchDir::ScratchDir() {
  std::mt19937_64 rng(std::random_device{}());
  // pid and 64 random bits: unique even when two suite runs overlap.
  path_ = std::filesystem::temp_directory_path() /
          ("attnscope-test-" + std::to_string(getpid()) + "-" + std::to_string(rng()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void ScratchDir::Write(const std::string& name, const std::string& contents) const {
  std::ofstream out(path_ / name, std::ios::binary | std::ios::trunc);
  out << contents;
}

void ScratchDir::CopyFrom(const std::string& dir) const {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::filesystem::copy_file(entry.path(), path_ / entry.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
  }
}

std::map<std::string, TensorToWrite> ReadAllTensors(const std::string& file) {
  std::map<std::string, TensorToWrite> out;
  auto f = SafetensorsFile::Open(file);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return out;
  for (const TensorRef& t : (*f)->tensors()) {
    out[t.name] = TensorToWrite{t.name, t.dtype, t.shape,
                                std::string(reinterpret_cast<const char*>(t.data), t.nbytes)};
  }
  return out;
}

}  // namespace attnscope::model::testing
