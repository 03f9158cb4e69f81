#include "service/model/gemm.h"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"
#include "service/core/parallel.h"
#include "service/core/vector_math.h"
#include "service/model/blas_info.h"
#include "service/model/panel_gemm.h"

namespace attnscope::model {
namespace {

using dnnl::memory;
using Dims = memory::dims;

bool HasIsa(dnnl_cpu_isa_t have, dnnl_cpu_isa_t want) {
  return (static_cast<unsigned>(have) & static_cast<unsigned>(want)) ==
         static_cast<unsigned>(want);
}

std::string IsaName(dnnl_cpu_isa_t isa) {
  if (HasIsa(isa, dnnl_cpu_isa_avx512_core_amx)) return "avx512_core_amx";
  if (HasIsa(isa, dnnl_cpu_isa_avx512_core_bf16)) return "avx512_core_bf16";
  if (HasIsa(isa, dnnl_cpu_isa_avx512_core_vnni)) return "avx512_core_vnni";
  if (HasIsa(isa, dnnl_cpu_isa_avx512_core)) return "avx512_core";
  if (HasIsa(isa, dnnl_cpu_isa_avx2)) return "avx2";
  if (HasIsa(isa, dnnl_cpu_isa_avx)) return "avx";
  return "sse41 or less";
}

struct Choice {
  GemmBackend backend = GemmBackend::kBlas;
  std::string asked;  // ATTNSCOPE_GEMM as given ("" when unset)
  bool unknown = false;
};

const Choice& TheChoice() {
  static const Choice choice = [] {
    Choice c;
    const char* env = std::getenv("ATTNSCOPE_GEMM");
    c.asked = env != nullptr ? env : "";
    if (c.asked == "blas") {
      c.backend = GemmBackend::kBlas;
    } else if (c.asked == "onednn") {
      c.backend = GemmBackend::kOneDnn;
    } else if (c.asked == "own") {
      c.backend = GemmBackend::kBlas;
    } else {
      // The project's own kernel wherever it runs (weights as stored, no
      // packing at load); oneDNN's packed weights only where it does not
      // and oneDNN has AVX-512 (no such CPU is known: AVX-512 implies AVX2).
      c.unknown = !c.asked.empty() && c.asked != "auto";
      c.backend = OneDnnHasAvx512() && !PanelGemmAvailable() ? GemmBackend::kOneDnn
                                                             : GemmBackend::kBlas;
    }
    return c;
  }();
  return choice;
}

const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

// Scratch memory of the calling thread: the primitives' scratchpads (user
// mode, so one primitive may run on several threads at once) and x rounded
// to bfloat16.
struct ThreadScratch {
  std::vector<uint8_t> pad;
  std::vector<uint16_t> bf16;
  std::vector<float> dense;
};
ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

// x (m x k, ldx) -> m dense rows of k in `out` (the calling thread's), each
// converted by `convert`, on the installed pool.
template <typename T, typename Convert>
const T* DenseRows(std::vector<T>& out, const float* x, int64_t m, int64_t k, int64_t ldx,
                   Convert convert) {
  if (out.size() < static_cast<size_t>(m * k)) out.resize(static_cast<size_t>(m * k));
  T* dst = out.data();
  core::ParallelFor(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const float* src = x + r * ldx;
                        T* row = dst + r * k;
                        for (int64_t j = 0; j < k; ++j) row[j] = convert(src[j]);
                      }
                    });
  return dst;
}

memory::data_type DataType(PackedType type) {
  return type == PackedType::kFloat32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// The layout oneDNN's matmul wants for B = W^T (k x n) of this type.
memory::desc MatmulWeightsDesc(int64_t n, int64_t k, PackedType type) {
  const memory::data_type dt = DataType(type);
  const memory::desc src({128, k}, dt, memory::format_tag::ab);
  const memory::desc weights({k, n}, dt, memory::format_tag::any);
  const memory::desc dst({128, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), Engine());
  return pd.weights_desc();
}

// Whether oneDNN has a bfloat16 matmul on this CPU (AVX-512 and later). Where
// it has none (AVX2), bfloat16 weights are stored in float32's packed layout
// and widened for each product, and bfloat16 products are computed as
// float32 products of bfloat16-rounded operands: the same numbers, since
// every product of two bfloat16 values is exact in float32.
bool NativeBf16() {
  static const bool native = [] {
    try {
      MatmulWeightsDesc(64, 64, PackedType::kBfloat16);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
}

// The type a product of stored `type` runs in.
PackedType KernelType(PackedType type) {
  return type == PackedType::kBfloat16 && !NativeBf16() ? PackedType::kFloat32 : type;
}

// How B = W^T of this type is stored: matmul's layout, or for bfloat16
// without a bfloat16 matmul, float32's layout holding bfloat16 values.
memory::desc PackedDesc(int64_t n, int64_t k, PackedType type) {
  if (KernelType(type) == type) return MatmulWeightsDesc(n, k, type);
  dnnl_memory_desc_t desc = MatmulWeightsDesc(n, k, PackedType::kFloat32).data;
  desc.data_type = dnnl_bf16;
  return memory::desc(desc);
}

// Matmul primitives by shape, shared by every matrix of that shape (the
// weights are an argument of each call, not part of the primitive). Making
// one generates its kernel, which is costly; a pass at a new T makes one
// for each distinct product shape. At most kMaxPrimitives, least recently
// used out.
struct PrimitiveKey {
  int64_t m, n, k, ldx, ldy;
  PackedType type;
  bool bias;
  Epilogue epilogue;
  bool operator<(const PrimitiveKey& o) const {
    return std::tie(m, n, k, ldx, ldy, type, bias, epilogue) <
           std::tie(o.m, o.n, o.k, o.ldx, o.ldy, o.type, o.bias, o.epilogue);
  }
};

// The activation as oneDNN's eltwise post-op.
void AppendEpilogue(Epilogue epilogue, dnnl::primitive_attr& attr) {
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0.0f;
  switch (epilogue) {
    case Epilogue::kNone:
      return;
    case Epilogue::kGeluTanh:
      algorithm = dnnl::algorithm::eltwise_gelu_tanh;
      break;
    case Epilogue::kGeluErf:
      algorithm = dnnl::algorithm::eltwise_gelu_erf;
      break;
    case Epilogue::kRelu:
      algorithm = dnnl::algorithm::eltwise_relu;
      break;
    case Epilogue::kSilu:
      algorithm = dnnl::algorithm::eltwise_swish;  // x sigmoid(alpha x)
      alpha = 1.0f;
      break;
  }
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, algorithm, alpha, 0.0f);
  attr.set_post_ops(ops);
}

struct Primitive {
  dnnl::matmul matmul;
  size_t scratchpad_bytes = 0;
  std::string implementation;
};

class PrimitiveCache {
 public:
  static constexpr size_t kMaxPrimitives = 96;

  std::shared_ptr<const Primitive> Get(const PrimitiveKey& key, const memory::desc& packed) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) {
        order_.splice(order_.begin(), order_, it->second.second);
        return it->second.first;
      }
    }
    std::shared_ptr<const Primitive> made = Make(key, packed);  // outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second.first;  // another thread made it first
    order_.push_front(key);
    entries_.emplace(key, std::make_pair(made, order_.begin()));
    if (entries_.size() > kMaxPrimitives) {
      entries_.erase(order_.back());
      order_.pop_back();
    }
    return made;
  }

 private:
  static std::shared_ptr<const Primitive> Make(const PrimitiveKey& key,
                                               const memory::desc& packed) {
    const memory::desc src({key.m, key.k}, DataType(key.type), Dims{key.ldx, 1});
    const memory::desc dst({key.m, key.n}, memory::data_type::f32, Dims{key.ldy, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    AppendEpilogue(key.epilogue, attr);
    const dnnl::matmul::desc desc =
        key.bias ? dnnl::matmul::desc(src, packed,
                                      memory::desc({1, key.n}, memory::data_type::f32,
                                                   memory::format_tag::ab),
                                      dst)
                 : dnnl::matmul::desc(src, packed, dst);
    const dnnl::matmul::primitive_desc pd(desc, attr, Engine());
    auto p = std::make_shared<Primitive>();
    p->matmul = dnnl::matmul(pd);
    p->scratchpad_bytes = pd.scratchpad_desc().get_size();
    p->implementation = pd.impl_info_str();
    return p;
  }

  std::mutex mu_;
  std::list<PrimitiveKey> order_;  // most recently used first
  std::map<PrimitiveKey,
           std::pair<std::shared_ptr<const Primitive>, std::list<PrimitiveKey>::iterator>>
      entries_;
};

PrimitiveCache& Primitives() {
  static PrimitiveCache* cache = new PrimitiveCache();  // outlives every thread's last call
  return *cache;
}

[[noreturn]] void Fail(const char* what, const dnnl::error& e) {
  throw std::runtime_error(std::string("oneDNN ") + what + " failed: " + e.what());
}

}  // namespace

GemmBackend ChosenGemmBackend() { return TheChoice().backend; }

bool PanelProducts() {
  static const bool panel = TheChoice().backend == GemmBackend::kBlas &&
                            TheChoice().asked != "blas" && PanelGemmAvailable();
  return panel;
}

bool SgemmOnOneDnn() {
  static const bool onednn = TheChoice().backend == GemmBackend::kOneDnn ||
                             (TheChoice().asked != "blas" && OneDnnHasAvx512());
  return onednn;
}

bool OneDnnHasAvx512() { return HasIsa(dnnl_get_effective_cpu_isa(), dnnl_cpu_isa_avx512_core); }

std::string GemmDescription() {
  const Choice& c = TheChoice();
  const dnnl_version_t* v = dnnl_version();
  const std::string onednn = "oneDNN " + std::to_string(v->major) + "." +
                             std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" +
                             IsaName(dnnl_get_effective_cpu_isa()) + ")";
  const std::string core = BlasCoreName();
  const std::string blas = core.empty() ? "BLAS" : "BLAS (OpenBLAS " + core + ")";
  std::string line;
  if (c.backend == GemmBackend::kOneDnn) {
    line = onednn + ": weights packed at load";
    if (!NativeBf16()) line += ", bfloat16 products as float32 products of rounded operands";
  } else if (PanelProducts()) {
    line = std::string("own kernel (") +
           (ChosenPanelIsa() == PanelIsa::kAvx512 ? "AVX-512" : "AVX2") +
           " tiles): weights as stored, BF16 widened while packed; other products: " +
           (SgemmOnOneDnn() ? onednn + " sgemm" : blas);
  } else {
    line = blas;
  }
  if (!c.asked.empty()) line += "; ATTNSCOPE_GEMM=" + c.asked;
  if (c.unknown) line += " is not one of auto, onednn, own, blas: auto";
  return line;
}

void Sgemm(bool b_transposed, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (SgemmOnOneDnn()) {
    const dnnl_status_t status = dnnl_sgemm('N', b_transposed ? 'T' : 'N', m, n, k, alpha, a,
                                            lda, b, ldb, 0.0f, c, ldc);
    if (status != dnnl_success) {
      throw std::runtime_error("oneDNN sgemm failed with status " + std::to_string(status));
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

namespace {

// A row chunk: rows [row0, row0 + rows) of W, packed on their own.
struct Chunk {
  int64_t row0 = 0, rows = 0;
  memory::desc desc;  // the packed layout of this chunk in the stored type
  memory packed;
  memory::desc wide;  // bfloat16 storage: the chunk's float32 packed layout
  dnnl::reorder widen;  // bfloat16 storage: packed bfloat16 -> packed float32
};

// Reorder primitives by (source, destination) layout, made once per
// process: a primitive depends on the layouts only, not on the data, and a
// model's chunks come in a few shapes (every full chunk of a matrix, and the
// same matrices in every layer), while making one costs about a
// millisecond, thousands of times over at load. oneDNN primitives may be
// executed from several threads at once.
dnnl::reorder CachedReorder(const memory::desc& from, const memory::desc& to) {
  static std::mutex mu;
  static std::vector<std::tuple<memory::desc, memory::desc, dnnl::reorder>> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [f, t, r] : cache) {
    if (f == from && t == to) return r;
  }
  dnnl::reorder r(dnnl::reorder::primitive_desc(Engine(), from, Engine(), to));
  cache.emplace_back(from, to, r);
  return r;
}

// One allocation for every chunk of a matrix, aligned to 2 MiB and advised
// as huge pages where the kernel offers them (transparent_hugepage=madvise):
// a model's packed weights are gigabytes, and faulting them in 4 KiB at a
// time cost more than packing them (seconds of system time at load).
class WeightBuffer {
 public:
  explicit WeightBuffer(size_t bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t rounded = std::max<size_t>((bytes + kHuge - 1) / kHuge * kHuge, kHuge);
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kHuge, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    ::madvise(data_, rounded, MADV_HUGEPAGE);  // advice: ignored where unsupported
  }
  ~WeightBuffer() { std::free(data_); }
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;
};

// Byte offsets of chunks of these sizes laid out in one buffer (each at a
// multiple of 4 KiB), and the buffer's size (last element).
std::vector<size_t> ChunkOffsets(const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (size_t bytes : sizes) {
    offsets.push_back(at);
    at += (bytes + 4095) / 4096 * 4096;
  }
  offsets.push_back(at);
  return offsets;
}

// Faults in the pages of [p, p + bytes) in one call where the kernel can
// (MADV_POPULATE_READ, Linux 5.14): packing reads a mapped checkpoint once,
// and one fault per 4 KiB page was most of the load's system time.
void Prefault(const void* p, size_t bytes) {
#ifdef MADV_POPULATE_READ
  const auto begin = reinterpret_cast<uintptr_t>(p) / 4096 * 4096;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  if (bytes > 0) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)p;
  (void)bytes;
#endif
}

// The descriptors of a chunk of `rows` x k stored as `type`, its memory at
// `data` (desc.get_size() bytes), and the primitive that widens a bfloat16
// one (made once: making it per product cost as much as running it).
Chunk MakeChunk(int64_t row0, int64_t rows, int64_t k, PackedType type, void* data) {
  Chunk c;
  c.row0 = row0;
  c.rows = rows;
  c.desc = PackedDesc(rows, k, type);
  c.packed = memory(c.desc, Engine(), data);
  if (type == PackedType::kBfloat16) {
    c.wide = PackedDesc(rows, k, PackedType::kFloat32);
    c.widen = CachedReorder(c.desc, c.wide);
  }
  return c;
}

}  // namespace


namespace {

size_t ElementBytes(PackedType type) { return type == PackedType::kFloat32 ? 4 : 2; }

// Row chunks of an n x k matrix stored as `type`: one for float32; for
// bfloat16 as many as keep each widened chunk within kChunkFloatBytes, of
// equal size in multiples of 64 rows (oneDNN's block of columns of B).
std::vector<std::pair<int64_t, int64_t>> ChunkRows(int64_t n, int64_t k, PackedType type) {
  int64_t per = n;
  if (type == PackedType::kBfloat16) {
    const int64_t most = std::max<int64_t>(
        64, PackedMatrix::kChunkFloatBytes / (4 * std::max<int64_t>(k, 1)) / 64 * 64);
    const int64_t count = (n + most - 1) / most;
    per = count <= 1 ? n : ((n + count - 1) / count + 63) / 64 * 64;
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t r = 0; r < n; r += per) out.emplace_back(r, std::min(per, n - r));
  if (out.empty()) out.emplace_back(0, n);
  return out;
}

// A growable buffer aligned to 64 bytes (a cache line: oneDNN's kernels
// read the weights and write the output a line at a time).
class AlignedBuffer {
 public:
  float* Reserve(size_t bytes) {
    if (bytes > capacity_) {
      const size_t rounded = (bytes + 63) / 64 * 64;
      data_.reset(static_cast<float*>(std::aligned_alloc(64, rounded)));
      if (!data_) throw std::bad_alloc();
      capacity_ = rounded;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
};

// The calling thread's float32 scratch for a widened chunk and for a
// chunk's output.
struct ChunkScratch {
  AlignedBuffer wide, out;
};
ChunkScratch& ChunkBuffers() {
  thread_local ChunkScratch scratch;
  return scratch;
}

// Offsets (in elements) of W's entries in a packed chunk: entry (row i, column
// j) of the chunk is at row_part(i) + column_part(j).
class BlockedOffsets {
 public:
  explicit BlockedOffsets(const memory::desc& desc) : md_(desc.data) {
    const dnnl_blocking_desc_t& b = md_.format_desc.blocking;
    for (int i = 0; i < b.inner_nblks; ++i) block_[b.inner_idxs[i]] *= b.inner_blks[i];
  }
  // B = W^T is (k x n): dimension 0 is W's column j, dimension 1 its row i.
  int64_t Part(int d, int64_t x) const {
    const dnnl_blocking_desc_t& b = md_.format_desc.blocking;
    int64_t at = (x / block_[d]) * b.strides[d], rest = x % block_[d], stride = 1;
    for (int i = b.inner_nblks - 1; i >= 0; --i) {
      if (b.inner_idxs[i] == d) {
        at += (rest % b.inner_blks[i]) * stride;
        rest /= b.inner_blks[i];
      }
      stride *= b.inner_blks[i];
    }
    return at;
  }
  int64_t offset0() const { return md_.offset0; }

 private:
  dnnl_memory_desc_t md_;
  int64_t block_[2] = {1, 1};
};

}  // namespace

struct PackedMatrix::Impl {
  std::unique_ptr<WeightBuffer> buffer;  // every chunk's memory
  std::vector<Chunk> chunks;
  // Or, packed for PanelGemm (PackPanels): bfloat16 panels in memory the
  // caller allocated (kept alive by `panel_owner`), no chunks.
  std::shared_ptr<void> panel_owner;
  const uint16_t* panels = nullptr;
  bool panel_layout = false;

  // The chunks of an n x k matrix stored as `type`, in one new buffer.
  static std::unique_ptr<Impl> Make(int64_t n, int64_t k, PackedType type) {
    auto impl = std::make_unique<Impl>();
    const std::vector<std::pair<int64_t, int64_t>> rows = ChunkRows(n, k, type);
    std::vector<size_t> sizes;
    for (const auto& [row0, count] : rows) sizes.push_back(PackedDesc(count, k, type).get_size());
    const std::vector<size_t> offsets = ChunkOffsets(sizes);
    impl->buffer = std::make_unique<WeightBuffer>(offsets.back());
    for (size_t i = 0; i < rows.size(); ++i) {
      impl->chunks.push_back(
          MakeChunk(rows[i].first, rows[i].second, k, type, impl->buffer->data() + offsets[i]));
    }
    return impl;
  }
};

PackedMatrix::PackedMatrix(int64_t n, int64_t k, PackedType type, std::unique_ptr<Impl> impl)
    : n_(n), k_(k), type_(type), impl_(std::move(impl)) {}

PackedMatrix::~PackedMatrix() = default;

int64_t PackedMatrix::PanelBytes(int64_t n, int64_t k) {
  return Bf16PanelElements(n, k) * static_cast<int64_t>(sizeof(uint16_t));
}

std::shared_ptr<const PackedMatrix> PackedMatrix::PackPanels(const uint16_t* w, int64_t n,
                                                             int64_t k, int64_t stride_n,
                                                             void* out,
                                                             std::shared_ptr<void> owner) {
  if (!PanelGemmAvailable()) {
    throw std::runtime_error("packing for the AVX2 kernel on a CPU without AVX2 and FMA");
  }
  if (reinterpret_cast<uintptr_t>(out) % 32 != 0) {
    throw std::invalid_argument("PackedMatrix::PackPanels: the panels' memory must be 32-byte aligned");
  }
  auto impl = std::make_unique<Impl>();
  impl->panel_layout = true;
  impl->panel_owner = std::move(owner);
  impl->panels = static_cast<const uint16_t*>(out);
  // The source's pages mapped in one call rather than a fault per page.
  Prefault(w, static_cast<size_t>((n - 1) * stride_n + k) * sizeof(uint16_t));
  PackBf16Panels(w, stride_n, n, k, static_cast<uint16_t*>(out));
  return std::shared_ptr<const PackedMatrix>(
      new PackedMatrix(n, k, PackedType::kBfloat16, std::move(impl)));
}

bool PackedMatrix::FusesEpilogue() const { return !impl_->panel_layout; }

size_t PackedMatrix::bytes() const {
  if (impl_->panel_layout) return static_cast<size_t>(PanelBytes(n_, k_));
  size_t total = 0;
  for (const Chunk& c : impl_->chunks) total += c.desc.get_size();
  return total;
}

int64_t PackedMatrix::chunks() const {
  return impl_->panel_layout ? 1 : static_cast<int64_t>(impl_->chunks.size());
}

std::shared_ptr<const PackedMatrix> PackedMatrix::Pack(const float* w, int64_t n, int64_t k,
                                                       int64_t stride_n, int64_t stride_k,
                                                       PackedType type) {
  return Pack(w, PackedType::kFloat32, n, k, stride_n, stride_k, type);
}

std::shared_ptr<const PackedMatrix> PackedMatrix::Pack(const void* w, PackedType source,
                                                       int64_t n, int64_t k, int64_t stride_n,
                                                       int64_t stride_k, PackedType type) {
  try {
    std::unique_ptr<Impl> impl = Impl::Make(n, k, type);
    Prefault(w, static_cast<size_t>((n - 1) * stride_n + (k - 1) * stride_k + 1) *
                    ElementBytes(source));
    dnnl::stream& stream = ThreadStream();
    for (Chunk& c : impl->chunks) {
      // B = W^T (k x rows): B[j][i] = W[row0 + i][j] at w[(row0 + i) * stride_n + j * stride_k].
      const memory::desc from({k, c.rows}, DataType(source), Dims{stride_k, stride_n});
      const auto* base = static_cast<const uint8_t*>(w) + c.row0 * stride_n * ElementBytes(source);
      memory src(from, Engine(), const_cast<uint8_t*>(base));
      CachedReorder(from, c.desc).execute(stream, src, c.packed);
    }
    stream.wait();
    return std::shared_ptr<const PackedMatrix>(new PackedMatrix(n, k, type, std::move(impl)));
  } catch (const dnnl::error& e) {
    Fail("packing a weight matrix", e);
  }
}

std::shared_ptr<const PackedMatrix> PackedMatrix::Converted(PackedType type) const {
  if (impl_->panel_layout) {
    throw std::invalid_argument("PackedMatrix::Converted: a matrix packed for the AVX2 kernel "
                                "is bfloat16 only");
  }
  try {
    std::unique_ptr<Impl> impl = Impl::Make(n_, k_, type);
    dnnl::stream& stream = ThreadStream();
    // Every overlap of a source chunk and a target chunk, as sub-memories of
    // both (chunk boundaries are multiples of 64 rows, oneDNN's blocks).
    for (const Chunk& from : impl_->chunks) {
      for (Chunk& to : impl->chunks) {
        const int64_t begin = std::max(from.row0, to.row0);
        const int64_t end = std::min(from.row0 + from.rows, to.row0 + to.rows);
        if (begin >= end) continue;
        const memory::desc src_desc =
            from.desc.submemory_desc({k_, end - begin}, {0, begin - from.row0});
        const memory::desc dst_desc = to.desc.submemory_desc({k_, end - begin}, {0, begin - to.row0});
        memory src(src_desc, Engine(), from.packed.get_data_handle());
        memory dst(dst_desc, Engine(), to.packed.get_data_handle());
        dnnl::reorder(src, dst).execute(stream, src, dst);
      }
    }
    stream.wait();
    return std::shared_ptr<const PackedMatrix>(new PackedMatrix(n_, k_, type, std::move(impl)));
  } catch (const dnnl::error& e) {
    Fail("converting a packed weight matrix", e);
  }
}

std::string PackedMatrix::Implementation(int64_t m) const {
  if (impl_->panel_layout) return "panel:avx2_bf16";
  try {
    const Chunk& c = impl_->chunks.front();
    const PackedType kernel = KernelType(type_);
    const PrimitiveKey key{m, c.rows, k_, k_, c.rows, kernel, false, Epilogue::kNone};
    return Primitives().Get(key, kernel == type_ ? c.desc : c.wide)->implementation;
  } catch (const dnnl::error& e) {
    Fail("making a matrix product", e);
  }
}

void PackedMatrix::GatherRows(const int64_t* ids, int64_t count, float* out) const {
  // Every id checked before any row is written, whatever the layout.
  for (int64_t r = 0; r < count; ++r) {
    if (ids[r] < 0 || ids[r] >= n_) {
      throw std::out_of_range("row " + std::to_string(ids[r]) + " of a packed matrix of " +
                              std::to_string(n_) + " rows");
    }
  }
  if (impl_->panel_layout) {
    for (int64_t r = 0; r < count; ++r) {
      float* dst = out + r * k_;
      for (int64_t j = 0; j < k_; ++j) {
        dst[j] = vmath::Bf16ToFloat(Bf16PanelValue(impl_->panels, k_, ids[r], j));
      }
    }
    return;
  }
  const std::vector<Chunk>& chunks = impl_->chunks;
  // Per chunk, the column part of each entry's offset, made when first needed.
  std::vector<std::vector<int64_t>> columns(chunks.size());
  for (int64_t r = 0; r < count; ++r) {
    const int64_t id = ids[r];
    size_t ci = 0;
    while (id >= chunks[ci].row0 + chunks[ci].rows) ++ci;
    const Chunk& c = chunks[ci];
    const BlockedOffsets offsets(c.desc);
    std::vector<int64_t>& column = columns[ci];
    if (column.empty()) {
      column.resize(static_cast<size_t>(k_));
      for (int64_t j = 0; j < k_; ++j) column[j] = offsets.offset0() + offsets.Part(0, j);
    }
    const int64_t row = offsets.Part(1, id - c.row0);
    float* dst = out + r * k_;
    if (type_ == PackedType::kFloat32) {
      const float* src = static_cast<const float*>(c.packed.get_data_handle()) + row;
      for (int64_t j = 0; j < k_; ++j) dst[j] = src[column[j]];
    } else {
      const uint16_t* src = static_cast<const uint16_t*>(c.packed.get_data_handle()) + row;
      for (int64_t j = 0; j < k_; ++j) dst[j] = vmath::Bf16ToFloat(src[column[j]]);
    }
  }
}

void PackedMatrix::Multiply(const float* x, int64_t m, int64_t ldx, const float* bias, float* y,
                            int64_t ldy, Epilogue epilogue, Operands operands) const {
  if (m <= 0) return;
  if (ldy != n_) throw std::invalid_argument("PackedMatrix::Multiply: ldy must equal n");
  const PackedType asked = operands == Operands::kFloat32 ? PackedType::kFloat32 : type_;
  if (impl_->panel_layout) {
    if (epilogue != Epilogue::kNone) {
      throw std::invalid_argument(
          "PackedMatrix::Multiply: a matrix packed for the AVX2 kernel fuses no activation");
    }
    // Bfloat16 products: x rounded to bfloat16 (PanelGemmBf16).
    if (asked == PackedType::kBfloat16) {
      PanelGemmBf16(x, m, ldx, impl_->panels, PanelWeights::kBfloat16Panels, n_, k_, k_, y, ldy);
    } else {
      PanelGemm(x, m, ldx, impl_->panels, PanelWeights::kBfloat16Panels, n_, k_, k_, y, ldy);
    }
    if (bias != nullptr) {
      core::ParallelFor(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(n_, 1)),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t r = begin; r < end; ++r) {
                            for (int64_t j = 0; j < n_; ++j) y[r * ldy + j] += bias[j];
                          }
                        });
    }
    return;
  }
  // Without a bfloat16 matmul, bfloat16 products run in float32 on rounded x.
  const PackedType compute = KernelType(asked);
  try {
    // oneDNN's brgemm kernels read dense rows only (a strided x, such as the
    // gate half of a gated MLP's output, would take its far slower reference
    // kernel): such an x is copied first, as bfloat16 is rounded.
    const void* src = x;
    if (compute == PackedType::kBfloat16) {
      src = DenseRows(Scratch().bf16, x, m, k_, ldx, vmath::FloatToBf16);
      ldx = k_;
    } else if (asked == PackedType::kBfloat16) {
      src = DenseRows(Scratch().dense, x, m, k_, ldx,
                      [](float v) { return vmath::Bf16ToFloat(vmath::FloatToBf16(v)); });
      ldx = k_;
    } else if (ldx != k_) {
      src = DenseRows(Scratch().dense, x, m, k_, ldx, [](float v) { return v; });
      ldx = k_;
    }
    const dnnl::engine& engine = Engine();
    dnnl::stream& stream = ThreadStream();
    ThreadScratch& scratch = Scratch();
    ChunkScratch& buffers = ChunkBuffers();
    const bool whole = impl_->chunks.size() == 1;
    memory src_mem(memory::desc({m, k_}, DataType(compute), Dims{ldx, 1}), engine,
                   const_cast<void*>(src));
    for (const Chunk& c : impl_->chunks) {
      // The chunk's weights as the product reads them: stored, or widened.
      memory weights = c.packed;
      memory::desc weights_desc = c.desc;
      if (compute != type_) {
        weights_desc = c.wide;
        weights = memory(c.wide, engine, buffers.wide.Reserve(c.wide.get_size()));
        memory stored = c.packed;
        c.widen.execute(stream, stored, weights);
      }
      // Several chunks: each writes its dense block of columns, copied into y.
      float* out = whole ? y : buffers.out.Reserve(static_cast<size_t>(m * c.rows) * sizeof(float));
      const PrimitiveKey key{m, c.rows, k_, ldx, c.rows, compute, bias != nullptr, epilogue};
      const std::shared_ptr<const Primitive> p = Primitives().Get(key, weights_desc);
      if (scratch.pad.size() < p->scratchpad_bytes) scratch.pad.resize(p->scratchpad_bytes);
      memory dst_mem(memory::desc({m, c.rows}, memory::data_type::f32, Dims{c.rows, 1}), engine,
                     out);
      memory pad_mem(
          memory::desc({static_cast<int64_t>(std::max<size_t>(p->scratchpad_bytes, 1))},
                       memory::data_type::u8, memory::format_tag::a),
          engine, scratch.pad.empty() ? nullptr : scratch.pad.data());
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst_mem}};
      if (p->scratchpad_bytes > 0) args.emplace(DNNL_ARG_SCRATCHPAD, pad_mem);
      if (bias != nullptr) {
        args.emplace(DNNL_ARG_BIAS, memory(memory::desc({1, c.rows}, memory::data_type::f32,
                                                        memory::format_tag::ab),
                                           engine, const_cast<float*>(bias + c.row0)));
      }
      p->matmul.execute(stream, args);
      stream.wait();
      if (!whole) {
        core::ParallelFor(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(c.rows, 1)),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t r = begin; r < end; ++r) {
                              std::memcpy(y + r * ldy + c.row0, out + r * c.rows,
                                          static_cast<size_t>(c.rows) * sizeof(float));
                            }
                          });
      }
    }
  } catch (const dnnl::error& e) {
    Fail("matrix product", e);
  }
}

}  // namespace attnscope::model
