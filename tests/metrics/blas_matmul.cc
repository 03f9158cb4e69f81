#include "tests/metrics/blas_matmul.h"

#include <ATen/ATen.h>

namespace attnscope::metrics::testing {

double SumOfBlasProduct(int n) {
  const at::Tensor a = at::ones({n, n}, at::kFloat);
  const at::Tensor b = at::full({n, n}, 2.0, at::kFloat);
  return at::matmul(a, b).sum().item<double>();
}

}  // namespace attnscope::metrics::testing
