// Fuzz target: model.safetensors.index.json. Each input is written as the
// index of a checkpoint directory that holds two real shards (made once, in
// a fresh temporary directory), then SafetensorsCheckpoint::OpenDirectory
// reads it the way a model load does. An index that loads must map every
// tensor it names to the shard that holds it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "service/core/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace fs = std::filesystem;

// A checkpoint directory with model-00001-of-00002.safetensors (tensors "a",
// "b") and model-00002-of-00002.safetensors ("c"); removed at exit.
class ShardedDirectory {
 public:
  ShardedDirectory() {
    std::string pattern = (fs::temp_directory_path() / "attnscope-fuzz-index-XXXXXX").string();
    FUZZ_CHECK(mkdtemp(pattern.data()) != nullptr, pattern);
    dir_ = pattern;
    WriteShard("model-00001-of-00002.safetensors",
               {attnscope::MakeF32Tensor("a", {2}, {1.0f, 2.0f}),
                attnscope::MakeI64Tensor("b", {1}, {7})});
    WriteShard("model-00002-of-00002.safetensors", {attnscope::MakeF32Tensor("c", {}, {3.0f})});
  }
  ~ShardedDirectory() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  const std::string& dir() const { return dir_; }
  std::string index_path() const { return (fs::path(dir_) / "model.safetensors.index.json").string(); }

 private:
  void WriteShard(const std::string& name, const std::vector<attnscope::TensorToWrite>& tensors) {
    const absl::Status status = attnscope::WriteSafetensors((fs::path(dir_) / name).string(), tensors);
    FUZZ_CHECK(status.ok(), status.ToString());
  }
  std::string dir_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Static: libFuzzer ends with exit(), which runs its destructor.
  static const ShardedDirectory shards;
  const ShardedDirectory* checkpoint = &shards;
  {
    std::ofstream out(checkpoint->index_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    FUZZ_CHECK(out.good(), checkpoint->index_path());
  }
  auto opened = attnscope::SafetensorsCheckpoint::OpenDirectory(checkpoint->dir());
  if (!opened.ok()) {
    FUZZ_CHECK(!opened.status().message().empty(), "an error without a message");
    return 0;
  }
  for (const std::string& name : (*opened)->Names()) {
    const attnscope::TensorRef* tensor = (*opened)->Find(name);
    FUZZ_CHECK(tensor != nullptr && tensor->name == name, name);
    const std::string file = (*opened)->FileOf(name);
    FUZZ_CHECK(fs::path(file).parent_path() == fs::path(checkpoint->dir()), file);
  }
  return 0;
}
