// Reader for the safetensors format and for Hugging Face checkpoints made of
// one or several safetensors files.
//
// Format: 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"k": "v"}}, then the raw little-endian data; offsets are
// relative to the start of the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/core/dtype.h"
#include "service/core/mapped_file.h"

namespace attnscope {

// One tensor inside a safetensors file. `data` points into the file's mapping
// (or buffer) and stays valid while the owning SafetensorsFile lives. The
// pointer is NOT necessarily aligned for the element type: copy with memcpy.
struct TensorRef {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  // Number of elements (product of shape; 1 for a scalar). -1 if a dimension
  // is negative or the product overflows int64, which SafetensorsFile rejects,
  // so only a hand-built TensorRef can give it.
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps `path` and validates it completely. Every malformed input gives an
  // InvalidArgument (NotFound for a missing file) whose message starts with
  // the path and names the problem: truncated file, header length beyond the
  // file, invalid JSON, an entry that is not an object or lacks a field,
  // unknown dtype, negative dimension, data offsets outside the data section,
  // reversed or overlapping offsets, byte size not matching shape x dtype,
  // __metadata__ that is not string -> string, or a JSON header longer than
  // 100,000,000 bytes (the reference implementation's limit). Zero-size
  // tensors may sit at any offset within the data section.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  // The same validation on bytes in memory; `name` stands for the path in
  // messages. The buffer is moved in and owned.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromBuffer(std::string name,
                                                                     std::string bytes);

  const std::string& path() const { return path_; }
  // Tensors in the order of their data offsets.
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  // nullptr if absent.
  const TensorRef* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // MappedFile::DropPages on this file's mapping (false for FromBuffer's).
  bool DropPages(const void* p, size_t n) const;

 private:
  SafetensorsFile() = default;
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Parse(
      std::unique_ptr<SafetensorsFile> file, const uint8_t* bytes, size_t size);
  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  std::string buffer_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a Hugging Face checkpoint directory: `model.safetensors`, or
// the shards listed in `model.safetensors.index.json` ("weight_map": name ->
// shard file). Errors name the file: missing directory, neither file present,
// invalid index JSON, a shard named in the index that does not exist, a
// tensor the index puts in a shard that lacks it, the same tensor in two
// shards, plus any SafetensorsFile error. NotFound for a missing directory,
// a directory with neither file, or a missing shard. Each shard is mapped
// once; tensors a shard holds beyond the weight_map are kept as well.
class SafetensorsCheckpoint {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenDirectory(
      const std::string& dir);

  // nullptr if absent.
  const TensorRef* Find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> Names() const;
  // Path of the file holding `name` ("" if absent), for error messages.
  std::string FileOf(std::string_view name) const;
  const std::string& directory() const { return dir_; }
  // Drops the resident pages of [p, p + n) when it lies inside one of the
  // mapped files (a tensor used straight from the mapping, once a copy of it
  // is all the process needs): MappedFile::DropPages. False otherwise.
  bool DropPages(const void* p, size_t n) const;

 private:
  // Takes ownership of `file` and indexes its tensors; InvalidArgument if a
  // tensor name is already held by a previously added file.
  absl::Status AddFile(std::unique_ptr<SafetensorsFile> file);
  absl::Status LoadIndex(const std::string& index_path);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorRef*, std::less<>> by_name_;
  std::map<std::string, std::string, std::less<>> file_of_;
};

// Copies a tensor to float32, converting F16 and BF16 (and F64, with
// rounding); InvalidArgument naming the tensor for integer or bool dtypes.
absl::StatusOr<std::vector<float>> ToFloat32(const TensorRef& tensor);
// Copies an I64 or I32 tensor to int64; InvalidArgument for other dtypes.
absl::StatusOr<std::vector<int64_t>> ToInt64(const TensorRef& tensor);

// A tensor to write: `data` holds exactly numel x DTypeSize(dtype) bytes,
// little-endian.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string data;
};

// Writes a safetensors file (tensors sorted by name, header padded with
// spaces to a multiple of 8 bytes, as the reference implementation does).
// InvalidArgument if a tensor's byte size does not match its shape; Internal
// if the file cannot be written.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Helpers to build TensorToWrite from typed vectors.
TensorToWrite MakeF32Tensor(std::string name, std::vector<int64_t> shape,
                            const std::vector<float>& values);
TensorToWrite MakeI64Tensor(std::string name, std::vector<int64_t> shape,
                            const std::vector<int64_t>& values);

}  // namespace attnscope
