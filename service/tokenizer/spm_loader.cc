// Finds and dlopens libattnscope_spm.so (see spm_backend.h).
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include "service/tokenizer/spm_backend.h"

namespace attnscope::tokenizer {
namespace {

using CreateFn = SpmBackend* (*)(const char*, std::string*);

// The library next to the running binary (installed layouts), else the one
// this build produced.
CreateFn LoadLibrary(std::string* error) {
  static std::once_flag once;
  static CreateFn create = nullptr;
  static std::string load_error;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / "libattnscope_spm.so").string());
    candidates.push_back(ATTNSCOPE_SPM_LIBRARY);
    for (const std::string& path : candidates) {
      if (!std::filesystem::exists(path, ec)) continue;
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        load_error = dlerror();
        continue;
      }
      create = reinterpret_cast<CreateFn>(dlsym(handle, "attnscope_spm_create"));
      if (create != nullptr) return;
      load_error = path + " has no attnscope_spm_create";
    }
    if (load_error.empty()) load_error = "libattnscope_spm.so not found next to the binary or at " ATTNSCOPE_SPM_LIBRARY;
  });
  if (create == nullptr) *error = load_error;
  return create;
}

}  // namespace

std::unique_ptr<SpmBackend> SpmBackend::Load(const std::string& path, std::string* error) {
  CreateFn create = LoadLibrary(error);
  if (create == nullptr) return nullptr;
  return std::unique_ptr<SpmBackend>(create(path.c_str(), error));
}

}  // namespace attnscope::tokenizer
