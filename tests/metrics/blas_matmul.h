// A BLAS-backed matrix product through libtorch, kept in its own translation
// unit so only it pays for <ATen/ATen.h>.
#pragma once

namespace attnscope::metrics::testing {

// Sum of the entries of ones(n, n) x full(n, n, 2) computed by at::matmul
// (float32 on the CPU, so OpenBLAS's sgemm): 2 n^3 when BLAS works.
double SumOfBlasProduct(int n);

}  // namespace attnscope::metrics::testing
