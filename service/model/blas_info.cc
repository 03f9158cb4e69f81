#include "service/model/blas_info.h"

#include <dlfcn.h>

#include <cstdlib>

#include "service/model/gemm.h"

namespace attnscope::model {

std::string BlasCoreName() {
  // Looked up at run time: the BLAS comes through Debian's alternatives and
  // need not be OpenBLAS.
  using CoreNameFn = char* (*)();
  auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn != nullptr ? fn() : nullptr;
  return name != nullptr ? name : "";
}

std::string BlasAdvice() {
  const std::string core = BlasCoreName();
  if (core.empty() || std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  const bool generic = core == "Prescott" || core == "Core2" || core == "Penryn" ||
                       core == "Nehalem" || core == "Dunnington" || core == "Atom";
  if (!generic) return "";
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f")) {
    better = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    better = "Haswell";
  }
  if (better == nullptr) return "";
  return "OpenBLAS did not recognise this CPU and uses its generic " + core +
         " kernels; set OPENBLAS_CORETYPE=" + better + " for several times faster matrix products";
}

std::string MatrixProductsDescription() { return GemmDescription(); }

}  // namespace attnscope::model
