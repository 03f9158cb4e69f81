#include "service/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace attnscope {
namespace {

absl::Status OsError(const std::string& path, const char* what, int error) {
  const std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(error));
  if (error == ENOENT || error == ENOTDIR) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// Closes the descriptor on every return path; the mapping outlives it.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(path, "cannot open", errno);
  FdCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0) return OsError(path, "cannot stat", errno);
  if (!S_ISREG(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  const size_t size = static_cast<size_t>(info.st_size);
  // mmap rejects a zero length, and an empty file has nothing to map anyway.
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return OsError(path, "cannot mmap", errno);
  return std::unique_ptr<MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(data), size));
}

bool MappedFile::DropPages(const void* p, size_t n) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(data_);
  if (data_ == nullptr || begin < base || n > size_ || begin - base > size_ - n) return false;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages only:
  const uintptr_t last = (begin + n) / page * page;          // neighbours keep theirs
  if (last > first) {
    // What reads the range again reads a few rows (an embedding's): no
    // readahead around them.
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_RANDOM);
    ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
  return true;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace attnscope
