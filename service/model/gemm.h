// Internal to the model library: the CPU matrix products of the forward pass,
// on raw float32 arrays. Torch-free (and free of oneDNN's headers).
//
// The weight matrices are multiplied by the project's own kernel
// (panel_gemm.h) wherever the CPU has AVX2 and FMA (AVX-512 tiles where it
// has AVX-512), on the weights where they lie in the mapped checkpoint,
// packed block by block in each product (a BF16 one widened while packed);
// a BF16 checkpoint's head, which each block of logit rows multiplies, is
// packed once at load into the kernel's bfloat16 panels
// (PackedMatrix::PackPanels). Nothing else is packed at load, so a model is
// ready as soon as it is mapped.
//
// Two libraries can multiply too: the BLAS libtorch uses (OpenBLAS here),
// and oneDNN (libdnnl, which Debian's libtorch links already). oneDNN's
// matmul primitive runs its brgemm kernels on weights packed once at load
// into the blocked layout those kernels read (ATTNSCOPE_GEMM=onednn; on
// AVX-512 BF16 CPUs its bfloat16 products take the CPU's dot-product
// instructions, twice the float32 rate). The other products (attention's
// few-row ones, the lens's) take oneDNN's sgemm on AVX-512 CPUs, where
// OpenBLAS 0.3.21 has AVX2 kernels only, and BLAS elsewhere.
//
// ATTNSCOPE_GEMM=auto (the default: the own kernel) | own | onednn | blas
// chooses; blas multiplies everything by BLAS (bfloat16 weights after
// widening chunks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace attnscope::model {

enum class GemmBackend { kBlas, kOneDnn };

// The backend this process uses, decided once from ATTNSCOPE_GEMM and the
// CPU. An unknown ATTNSCOPE_GEMM value is reported by GemmDescription and
// treated as auto.
GemmBackend ChosenGemmBackend();

// True when oneDNN's effective instruction set is AVX-512 (avx512_core) or
// better.
bool OneDnnHasAvx512();

// True where Sgemm runs oneDNN's sgemm: the oneDNN backend, or an AVX-512
// CPU unless ATTNSCOPE_GEMM=blas (OpenBLAS 0.3.21 has AVX2 kernels only
// there).
bool SgemmOnOneDnn();

// True where unpacked weight matrices (float32 or bfloat16, rows dense) go
// through PanelGemm: AVX2 and FMA, ATTNSCOPE_GEMM auto or own.
bool PanelProducts();

// One line for logs and benchmarks, e.g. "own kernel (AVX-512 tiles):
// weights as stored, ...", "oneDNN 2.6.3 (avx512_core_bf16): weights packed
// at load" or "BLAS (OpenBLAS Haswell)".
std::string GemmDescription();

// C (m x n, row-major, ldc) = alpha * A (m x k, lda) * op(B), op(B) = B
// (k x n, ldb) or B^T for B (n x k, ldb) when b_transposed; beta = 0. On
// the chosen backend (oneDNN's sgemm or cblas_sgemm). Single-threaded when
// called inside a parallel region.
void Sgemm(bool b_transposed, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

enum class PackedType { kFloat32, kBfloat16 };

// An activation applied to y = x W^T + b inside the product's kernel
// (oneDNN's eltwise post-op), on the float32 result: gelu with tanh
// (gelu_new) or erf, relu, silu (x sigmoid(x)).
enum class Epilogue { kNone, kGeluTanh, kGeluErf, kRelu, kSilu };

// What a packed matrix's products take as operands: its stored type
// (bfloat16 storage: bfloat16 products accumulated in float32), or float32
// whatever it stores: bfloat16 storage is then widened to float32 (exactly)
// chunk by chunk into the calling thread's scratch just before each product.
enum class Operands { kStored, kFloat32 };

// A weight matrix W (n x k) in oneDNN's packed layout, for y = x W^T + b.
// kBfloat16 packs W rounded to bfloat16 (round to nearest even, as
// at::Tensor::to(kBFloat16)), or a bfloat16 source as it is; its products
// round x the same way and accumulate in float32, so they equal a float32
// product of the rounded operands up to the order of the sums.
//
// A bfloat16 matrix is stored in chunks of rows (each at most
// kChunkFloatBytes once widened to float32, at least 64 rows), so that a
// float32 product widens one chunk at a time into a scratch that stays in
// the core's cache instead of the whole matrix (a 128K x 4096 head is 2 GiB
// as float32): the bfloat16 weights are the only copy a bfloat16 checkpoint
// needs in either precision. Widening costs ~10% of a float32 product at
// 512 rows, and is most of it for one row (a decoding step): see the
// README's Precision section.
class PackedMatrix {
 public:
  static constexpr int64_t kChunkFloatBytes = int64_t{1} << 20;

  // W[i][j] at w[i * stride_n + j * stride_k]. Works on any x86-64 CPU
  // (the model packs only where ChosenGemmBackend() is kOneDnn); throws
  // std::runtime_error if oneDNN refuses.
  static std::shared_ptr<const PackedMatrix> Pack(const float* w, int64_t n, int64_t k,
                                                  int64_t stride_n, int64_t stride_k,
                                                  PackedType type);
  // The same from a source of `source` type (a bfloat16 checkpoint's matrix:
  // 16-bit values, strides in elements). Packing a bfloat16 source as
  // kBfloat16 copies its values as they are; as kFloat32 widens them.
  static std::shared_ptr<const PackedMatrix> Pack(const void* w, PackedType source, int64_t n,
                                                  int64_t k, int64_t stride_n, int64_t stride_k,
                                                  PackedType type);
  // A bfloat16 W (n x k, rows dense, row stride stride_n) packed for the
  // project's AVX2 kernel (panel_gemm.h), on CPUs without AVX-512 (where
  // PanelGemmAvailable()): products in float32 on the bfloat16 values
  // (Operands::kStored rounds x to bfloat16 first), the same bits as the
  // kernel's products on the rows, with no packing per product. Its
  // products fuse no activation (FusesEpilogue() false): the caller applies
  // it. The panels go to `out` (PanelBytes(n, k) bytes, 32-byte aligned,
  // the caller's: a model's tensor, from its tensor cache), kept alive by
  // `owner`.
  // std::runtime_error on a CPU without AVX2 and FMA.
  static int64_t PanelBytes(int64_t n, int64_t k);
  static std::shared_ptr<const PackedMatrix> PackPanels(const uint16_t* w, int64_t n, int64_t k,
                                                        int64_t stride_n, void* out,
                                                        std::shared_ptr<void> owner);
  ~PackedMatrix();
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  // The same matrix packed as `type` (bfloat16 from float32 rounds it as
  // Pack does), from this packed copy: no second read of the source.
  std::shared_ptr<const PackedMatrix> Converted(PackedType type) const;

  // y (m x n, dense: row stride n) = x (m x k, row stride ldx) W^T
  // (+ bias (n)). A strided x is copied to dense rows first (oneDNN's fast
  // kernels read only those); std::invalid_argument for ldy != n.
  // `operands`: kStored computes in the stored type; kFloat32 computes in
  // float32 (a bfloat16 matrix widened chunk by chunk, exactly).
  // Threads: the calling thread's OpenMP thread count (libtorch's). Safe
  // to call from several threads at once. Throws std::runtime_error.
  void Multiply(const float* x, int64_t m, int64_t ldx, const float* bias, float* y,
                int64_t ldy, Epilogue epilogue = Epilogue::kNone,
                Operands operands = Operands::kStored) const;

  // out[r] (k floats each) = row ids[r] of W, read from the packed copy (a
  // bfloat16 one widened, exactly): a tied embedding's lookup without its
  // source. std::out_of_range for an id outside [0, n).
  void GatherRows(const int64_t* ids, int64_t count, float* out) const;

  // The name of the oneDNN kernel that multiplies m dense rows by this
  // matrix ("brg:avx512_core", ...; "ref:any" is its slow reference one).
  std::string Implementation(int64_t m) const;

  // False for PackPanels' matrices: Multiply takes Epilogue::kNone only.
  bool FusesEpilogue() const;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  PackedType type() const { return type_; }
  size_t bytes() const;
  // Row chunks the matrix is stored in (1 for float32 storage).
  int64_t chunks() const;

 private:
  struct Impl;
  PackedMatrix(int64_t n, int64_t k, PackedType type, std::unique_ptr<Impl> impl);
  int64_t n_, k_;
  PackedType type_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::model
