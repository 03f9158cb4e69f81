// Which BLAS kernels libtorch's matrix products run on. Torch-free.
#pragma once

#include <string>

namespace attnscope::model {

// OpenBLAS's kernel set ("SkylakeX", "Haswell", "Prescott", ...), or "" when
// the BLAS in use is not OpenBLAS.
std::string BlasCoreName();

// A one-line advice when OpenBLAS fell back to generic kernels on a CPU that
// has AVX-512 or AVX2 (OpenBLAS 0.3.21 does not recognise some virtual CPU
// models and picks "Prescott", several times slower), naming the
// OPENBLAS_CORETYPE value to set; "" when there is nothing to advise.
std::string BlasAdvice();

// What multiplies the CPU's matrix products, e.g. "own kernel (AVX-512
// tiles): ...", "oneDNN 2.6.3 (avx512_core_bf16): weights packed at load"
// or "BLAS (OpenBLAS Haswell)" (ATTNSCOPE_GEMM=auto|own|onednn|blas
// chooses; see gemm.h).
std::string MatrixProductsDescription();

}  // namespace attnscope::model
