#include "tests/reference/checkpoint_copies.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/core/safetensors.h"

namespace attnscope::reference {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  return j;
}

absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2);
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

}  // namespace

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  std::random_device random;
  path_ = (fs::temp_directory_path() /
           absl::StrCat("attnscope-reference-", getpid(), "-", counter++, "-", random()))
              .string();
  fs::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

absl::Status CopyWithConfig(const std::string& from, const std::string& to,
                            const std::map<std::string, std::string>& overrides) {
  std::error_code error;
  fs::create_directories(to, error);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path().filename() == "config.json") continue;
    fs::copy_file(entry.path(), fs::path(to) / entry.path().filename(),
                  fs::copy_options::overwrite_existing, error);
    if (error) return absl::InternalError(absl::StrCat("copy ", entry.path().string(), ": ",
                                                       error.message()));
  }
  auto config = ReadJsonFile(from + "/config.json");
  if (!config.ok()) return config.status();
  for (const auto& [key, value] : overrides) (*config)[key] = nlohmann::json::parse(value);
  return WriteJsonFile(to + "/config.json", *config);
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN stays NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

absl::Status WriteRoundedCopy(const std::string& from, const std::string& to, bool bf16) {
  auto file = SafetensorsFile::Open(from + "/model.safetensors");
  if (!file.ok()) return file.status();
  std::vector<TensorToWrite> out;
  for (const TensorRef& t : (*file)->tensors()) {
    auto values = ToFloat32(t);
    if (!values.ok()) {  // integer tensors are copied as they are
      out.push_back({t.name, t.dtype, t.shape,
                     std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
      continue;
    }
    std::vector<uint16_t> halves(values->size());
    for (size_t i = 0; i < halves.size(); ++i) halves[i] = FloatToBFloat16((*values)[i]);
    if (bf16) {
      out.push_back({t.name, DType::kBF16, t.shape,
                     std::string(reinterpret_cast<const char*>(halves.data()), halves.size() * 2)});
    } else {
      for (size_t i = 0; i < halves.size(); ++i) (*values)[i] = BFloat16ToFloat(halves[i]);
      out.push_back(MakeF32Tensor(t.name, t.shape, *values));
    }
  }
  std::error_code error;
  fs::create_directories(to, error);
  if (absl::Status s = WriteSafetensors(to + "/model.safetensors", out); !s.ok()) return s;
  auto config = ReadJsonFile(from + "/config.json");
  if (!config.ok()) return config.status();
  (*config)["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  return WriteJsonFile(to + "/config.json", *config);
}

}  // namespace attnscope::reference
