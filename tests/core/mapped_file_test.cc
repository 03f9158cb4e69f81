// MappedFile::DropPages: the pages of a range leave the process's memory,
// the bytes read back unchanged, and ranges outside the mapping are refused.
#include "service/core/mapped_file.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/temp_path.h"

namespace attnscope {
namespace {

// Resident KiB of the mapping that starts at `start` (/proc/self/smaps).
int64_t ResidentKib(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  char head[32];
  std::snprintf(head, sizeof head, "%lx-", reinterpret_cast<unsigned long>(start));
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(head, 0) == 0) {
      in = true;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      int64_t kib = -1;
      fields >> kib;
      return kib;
    }
  }
  return -1;
}

class DropPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::UniqueTempPath("dropped-pages");
    bytes_.resize(64 * 4096 + 123);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<char>(i * 7 + i / 4096);
    std::ofstream(path_, std::ios::binary).write(bytes_.data(), static_cast<long>(bytes_.size()));
    auto file = MappedFile::Open(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  // Reads every byte through the mapping; true when all equal the file's.
  bool ReadsBack() const {
    for (size_t i = 0; i < bytes_.size(); ++i) {
      if (static_cast<char>(file_->data()[i]) != bytes_[i]) return false;
    }
    return true;
  }

  std::string path_;
  std::vector<char> bytes_;
  std::unique_ptr<MappedFile> file_;
};

TEST_F(DropPagesTest, DropsTheWholePagesOfTheRangeAndTheBytesReadBack) {
  ASSERT_TRUE(ReadsBack());  // every page resident now
  const int64_t before = ResidentKib(file_->data());
  ASSERT_GE(before, 64 * 4) << "the mapping was not found in /proc/self/smaps";
  EXPECT_TRUE(file_->DropPages(file_->data(), file_->size()));
  const int64_t after = ResidentKib(file_->data());
  EXPECT_LT(after, before / 4) << "before " << before << " KiB, after " << after << " KiB";
  EXPECT_TRUE(ReadsBack());
}

TEST_F(DropPagesTest, AnUnalignedRangeReadsBackUnchanged) {
  ASSERT_TRUE(ReadsBack());
  const long page = ::sysconf(_SC_PAGESIZE);
  // From the middle of page 1 to the middle of page 3: page 2 goes, and
  // whatever the kernel maps again on the next read is the file's bytes.
  EXPECT_TRUE(file_->DropPages(file_->data() + page + page / 2, 2 * page));
  EXPECT_TRUE(ReadsBack());
  EXPECT_TRUE(file_->DropPages(file_->data() + 1, 10));  // within one page: nothing to drop
  EXPECT_TRUE(ReadsBack());
}

TEST_F(DropPagesTest, RefusesRangesOutsideTheMapping) {
  std::vector<char> elsewhere(8192, 'x');
  EXPECT_FALSE(file_->DropPages(elsewhere.data(), elsewhere.size()));
  EXPECT_EQ(elsewhere[4096], 'x');
  EXPECT_FALSE(file_->DropPages(file_->data() + 4096, file_->size()));  // runs past the end
  EXPECT_FALSE(file_->DropPages(file_->data() - 1, 16));
  EXPECT_TRUE(file_->DropPages(file_->data() + file_->size(), 0));  // empty, at the end
  EXPECT_TRUE(ReadsBack());
}

}  // namespace
}  // namespace attnscope
