// A read-only memory mapping of a whole file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace attnscope {

// Owns an mmap(2) of a file for its lifetime. Pages are loaded on demand, so
// opening a multi-gigabyte checkpoint costs nothing until bytes are read.
class MappedFile {
 public:
  // NotFound if the file does not exist; FailedPrecondition if it is not a
  // regular file; Internal for other OS errors. An empty file maps to size 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops the resident pages wholly inside [p, p + n) (madvise DONTNEED):
  // the process's memory shrinks by them, and reading them again loads them
  // from the file again. True when [p, p + n) lies inside this mapping
  // (whether or not any page was dropped), false (nothing done) otherwise.
  bool DropPages(const void* p, size_t n) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace attnscope
