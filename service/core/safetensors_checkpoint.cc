// SafetensorsCheckpoint: a Hugging Face checkpoint directory, single-file or
// sharded with model.safetensors.index.json.
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/safetensors.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"

namespace attnscope {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool IsRegularFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// A shard name must stay inside the checkpoint directory: a hostile index
// must not make us map arbitrary files.
bool IsSafeShardName(const std::string& name) {
  const fs::path path(name);
  if (name.empty() || path.is_absolute()) return false;
  for (const fs::path& part : path) {
    if (part == "..") return false;
  }
  return true;
}

absl::StatusOr<Json> ReadJson(const std::string& path) {
  ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  const char* begin = reinterpret_cast<const char*>(file->data());
  const std::string text = file->size() == 0 ? std::string() : std::string(begin, file->size());
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", SanitizeUtf8(e.what())));
  }
}

// The index's weight_map as tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& index_path) {
  ATTNSCOPE_ASSIGN_OR_RETURN(Json index, ReadJson(index_path));
  const auto it = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || it == index.end() || !it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": expected a JSON object with a \"weight_map\" object"));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map[\"", tensor,
                                                     "\"] is a JSON ", shard.type_name(),
                                                     ", expected a shard file name"));
    }
    const std::string& name = shard.get_ref<const std::string&>();
    if (!IsSafeShardName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map[\"", tensor,
                                                     "\"] names shard \"", name,
                                                     "\", which is outside the directory"));
    }
    weight_map[tensor] = fs::path(name).lexically_normal().string();
  }
  return weight_map;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::OpenDirectory(
    const std::string& dir) {
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (status.type() == fs::file_type::not_found || status.type() == fs::file_type::none) {
    return absl::NotFoundError(absl::StrCat(dir, ": checkpoint directory does not exist"));
  }
  if (status.type() != fs::file_type::directory) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": not a directory"));
  }
  auto checkpoint = std::make_unique<SafetensorsCheckpoint>();
  checkpoint->dir_ = dir;
  const fs::path single = fs::path(dir) / kSingleFile;
  const fs::path index = fs::path(dir) / kIndexFile;
  if (IsRegularFile(single)) {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                               SafetensorsFile::Open(single.string()));
    ATTNSCOPE_RETURN_IF_ERROR(checkpoint->AddFile(std::move(file)));
  } else if (IsRegularFile(index)) {
    ATTNSCOPE_RETURN_IF_ERROR(checkpoint->LoadIndex(index.string()));
  } else {
    return absl::NotFoundError(absl::StrCat(dir, ": neither ", kSingleFile, " nor ", kIndexFile,
                                            " found"));
  }
  return checkpoint;
}

absl::Status SafetensorsCheckpoint::LoadIndex(const std::string& index_path) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const auto weight_map, ReadWeightMap(index_path));
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : weight_map) shards.insert(shard);
  std::map<std::string, std::string> shard_paths;
  for (const std::string& shard : shards) {
    const std::string path = (fs::path(dir_) / shard).string();
    if (!IsRegularFile(path)) {
      return absl::NotFoundError(absl::StrCat(index_path, ": shard '", shard,
                                              "' listed in the index does not exist (", path,
                                              ")"));
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    ATTNSCOPE_RETURN_IF_ERROR(AddFile(std::move(file)));
    shard_paths[shard] = path;
  }
  for (const auto& [tensor, shard] : weight_map) {
    if (FileOf(tensor) != shard_paths[shard]) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor '", tensor,
                                                     "' is mapped to shard '", shard,
                                                     "', which does not contain it"));
    }
  }
  return absl::OkStatus();
}

absl::Status SafetensorsCheckpoint::AddFile(std::unique_ptr<SafetensorsFile> file) {
  for (const TensorRef& tensor : file->tensors()) {
    const auto [it, inserted] = file_of_.emplace(tensor.name, file->path());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(file->path(), ": tensor '", tensor.name,
                                                     "' is also in ", it->second));
    }
    by_name_.emplace(tensor.name, &tensor);
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

const TensorRef* SafetensorsCheckpoint::Find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

bool SafetensorsCheckpoint::DropPages(const void* p, size_t n) const {
  for (const std::unique_ptr<SafetensorsFile>& file : files_) {
    if (file->DropPages(p, n)) return true;
  }
  return false;
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& [name, tensor] : by_name_) names.push_back(name);
  return names;
}

std::string SafetensorsCheckpoint::FileOf(std::string_view name) const {
  const auto it = file_of_.find(name);
  return it == file_of_.end() ? std::string() : it->second;
}

}  // namespace attnscope
