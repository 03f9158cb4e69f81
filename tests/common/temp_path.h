// Names in the test temp directory that no other test, and no other run of
// the suite, uses at the same time: ctest runs tests in parallel, each in its
// own process, and two suite runs (a developer's and CI's, or a plain and a
// sanitizer build) may share /tmp.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace attnscope::test {

// Removes, when the test process exits, whatever was made at the paths it
// handed out (files or whole directories).
class TempPathJanitor {
 public:
  static TempPathJanitor& Get() {
    static TempPathJanitor janitor;
    return janitor;
  }
  void Add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(path);
  }
  ~TempPathJanitor() {
    std::error_code ignored;
    for (const std::string& path : paths_) std::filesystem::remove_all(path, ignored);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

// TempDir()/attnscope-STEM-PID-N: STEM may end with an extension
// ("chat.json" gives attnscope-chat-PID-N.json). Nothing is created; what
// the test makes there is removed when the process exits.
inline std::string UniqueTempPath(std::string_view stem) {
  static std::atomic<int> next{0};
  const size_t dot = stem.rfind('.');
  const std::string_view base = dot == std::string_view::npos ? stem : stem.substr(0, dot);
  const std::string_view ext = dot == std::string_view::npos ? "" : stem.substr(dot);
  std::string path = ::testing::TempDir() + "/attnscope-" + std::string(base) + "-" +
                     std::to_string(::getpid()) + "-" + std::to_string(next++) + std::string(ext);
  TempPathJanitor::Get().Add(path);
  return path;
}

}  // namespace attnscope::test
