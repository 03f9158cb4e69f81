#include "service/model/device.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/model/gemm.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

void ForEachMatrix(DecoderWeights& w, const std::function<void(at::Tensor&)>& fn) {
  ForEachLinear(w, [&](LinearWeights& l) {
    if (l.weight.defined()) fn(l.weight);
  });
  if (w.head.defined()) fn(w.head);
}

void ForEachTensor(DecoderWeights& w, const std::function<void(at::Tensor&)>& fn) {
  auto visit = [&](at::Tensor& t) {
    if (t.defined()) fn(t);
  };
  auto norm = [&](NormWeights& n) {
    visit(n.weight);
    visit(n.bias);
  };
  visit(w.embed);
  visit(w.positions);
  visit(w.head);
  norm(w.final_norm);
  for (LinearWeights* l : {&w.project_in, &w.project_out}) {
    visit(l->weight);
    visit(l->bias);
  }
  for (LayerWeights& l : w.layers) {
    for (NormWeights* n : {&l.attn_norm, &l.mlp_norm, &l.post_attn_norm, &l.post_mlp_norm,
                           &l.q_norm, &l.k_norm}) {
      norm(*n);
    }
    for (LinearWeights* m : {&l.qkv, &l.o, &l.up, &l.down}) {
      visit(m->weight);
      visit(m->bias);
    }
  }
}

}  // namespace

absl::StatusOr<c10::Device> ResolveDevice(DeviceKind kind) {
  const bool cuda = at::hasCUDA();
  if (kind == DeviceKind::kCpu || (kind == DeviceKind::kAuto && !cuda)) return c10::Device(at::kCPU);
  if (cuda) return c10::Device(at::kCUDA, 0);
  if (!BuiltWithCuda()) {
    return absl::FailedPreconditionError(
        "--device cuda: this attnscope was built against a libtorch without CUDA (Debian's "
        "CPU-only libtorch); rebuild with cmake -DTorch_DIR=<CUDA libtorch>/share/cmake/Torch, "
        "or use --device cpu (or auto, which falls back to the CPU)");
  }
  return absl::FailedPreconditionError(
      "--device cuda: libtorch was built with CUDA but sees no CUDA device (check the driver "
      "and CUDA_VISIBLE_DEVICES), or use --device cpu (or auto)");
}

void MoveWeights(DecoderWeights& weights, const c10::Device& device) {
  if (device.is_cpu()) return;
  ForEachTensor(weights, [&](at::Tensor& t) { t = t.to(device); });
}

DecoderWeights Bf16Matrices(const DecoderWeights& weights) {
  DecoderWeights copy = weights;  // tensors are shared until replaced below
  // Packed matrices: their bfloat16 packing, made from the packed float32
  // copy (the source may be gone); a bfloat16 packing (a BF16 checkpoint's)
  // is shared as it is. The float32 tensors are not needed.
  auto convert = [](std::shared_ptr<const PackedMatrix>& p) {
    if (p && p->type() != PackedType::kBfloat16) p = p->Converted(PackedType::kBfloat16);
    return p != nullptr;
  };
  ForEachLinear(copy, [&](LinearWeights& l) {
    if (convert(l.packed)) l.weight = at::Tensor();
  });
  if (convert(copy.head_packed)) copy.head = at::Tensor();
  ForEachMatrix(copy, [](at::Tensor& t) {
    if (t.scalar_type() == at::kBFloat16) return;  // as stored: shared, no copy
    const at::Tensor rounded = t.to(at::kBFloat16).contiguous();
    // On the own kernel the CPU keeps them as bfloat16 too: the products of
    // a BF16 checkpoint's (PanelGemmBf16), the same bits.
    t = t.is_cuda() || PanelProducts() ? rounded : rounded.to(at::kFloat);
  });
  return copy;
}

at::Tensor RoundToBf16(const at::Tensor& x) { return x.to(at::kBFloat16).to(x.scalar_type()); }

at::Tensor LinearBf16(const at::Tensor& x, const LinearWeights& w16) {
  if (w16.packed) {  // rounds x itself
    return PackedLinear(x, *w16.packed, w16.bias, Epilogue::kNone, Operands::kStored);
  }
  const at::Tensor& w = w16.weight;
  if (x.is_cpu() && PanelProducts() && x.scalar_type() == at::kFloat &&
      w.scalar_type() == at::kBFloat16 && w.dim() == 2 && w.stride(1) == 1 &&
      x.numel() > kDotProductRows * w.size(1)) {
    // The own kernel's bfloat16 products on the stored rows (it rounds x).
    const int64_t n = w.size(0), k = w.size(1);
    const at::Tensor a = x.contiguous();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = n;
    at::Tensor y = at::empty(sizes, x.options());
    PanelGemmBf16(a.data_ptr<float>(), a.numel() / k, k, w.data_ptr(), PanelWeights::kBfloat16, n,
                  k, w.stride(0), y.data_ptr<float>(), n);
    if (w16.bias.defined()) y.add_(w16.bias);
    return y;
  }
  at::Tensor y = x.is_cuda() ? at::matmul(x.to(at::kBFloat16), w.t()).to(at::kFloat)
                             : WidenedLinear(RoundToBf16(x), w, at::Tensor());
  if (w16.bias.defined()) y.add_(w16.bias);
  return y;
}

}  // namespace attnscope::model
