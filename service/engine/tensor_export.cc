#include "service/engine/tensor_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/dtype.h"
#include "service/core/status_macros.h"

namespace attnscope::engine {
namespace {

// One tensor's place in the data section and how much of it has arrived.
struct Region {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, bytes = 0;  // in the data section
};

}  // namespace

struct ExportWriter::Impl {
  std::string path;
  int fd = -1;
  bool finished = false;
  HeadSelection attention;
  int64_t num_layers = 0;
  bool float16 = false;
  std::string metadata_json;
  int64_t header_reserve = 0;  // bytes after the 8-byte length

  int64_t tokens = -1, width = -1;
  int64_t end = 0;  // the data section's end so far (regions are placed in order)
  std::vector<Region> regions;
  int attention_region = -1, hidden_region = -1, final_region = -1, ids_region = -1,
      logits_region = -1;
  std::vector<int64_t> attention_next;  // per slot: the next byte expected
  std::vector<int64_t> hidden_next;     // per state: bytes arrived
  int64_t logits_next = 0;
  std::string final_state;  // the narrower last state, kept until complete
  std::vector<uint16_t> halves;

  int Place(std::string name, std::string dtype, std::vector<int64_t> shape, int64_t bytes) {
    regions.push_back(Region{std::move(name), std::move(dtype), std::move(shape), end, bytes});
    end += bytes;
    return static_cast<int>(regions.size()) - 1;
  }

  absl::Status Write(const char* data, int64_t size, int64_t data_offset) {
    int64_t at = 8 + header_reserve + data_offset;
    while (size > 0) {
      const ssize_t n = pwrite(fd, data, static_cast<size_t>(size), at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::InternalError(absl::StrCat("cannot write the export to ", path, ": ",
                                                std::strerror(errno)));
      }
      data += n;
      size -= n;
      at += n;
    }
    return absl::OkStatus();
  }

  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("export to ", path, ": ", what));
  }

  absl::Status SetTokens(int64_t t) {
    if (tokens < 0) {
      if (t < 1) return Bad(absl::StrCat("a tensor of ", t, " tokens"));
      tokens = t;
      const int64_t element = float16 ? 2 : 4;
      if (attention.size() > 0) {
        attention_region = Place("attentions", float16 ? "F16" : "F32",
                                 {static_cast<int64_t>(attention.layers.size()),
                                  static_cast<int64_t>(attention.heads.size()), t, t},
                                 attention.size() * t * t * element);
        attention_next.assign(static_cast<size_t>(attention.size()), 0);
      }
      hidden_next.assign(static_cast<size_t>(num_layers + 1), 0);
    }
    if (t != tokens) return Bad(absl::StrCat("a tensor of ", t, " tokens after ", tokens));
    return absl::OkStatus();
  }

  absl::Status AddAttention(const TensorPiece& p) {
    const int64_t l = attention.LayerSlot(p.layer), h = attention.HeadSlot(p.head);
    if (l < 0 || h < 0) return Bad(absl::StrCat("head ", p.layer, ".", p.head, " was not selected"));
    if (p.cols != tokens) return Bad(absl::StrCat("an attention of ", p.cols, " keys"));
    const int64_t slot = l * static_cast<int64_t>(attention.heads.size()) + h;
    const int64_t in = p.float16 ? 2 : 4, out = float16 ? 2 : 4;
    int64_t& next = attention_next[static_cast<size_t>(slot)];
    if (p.offset % in != 0 || p.size % in != 0 || p.offset / in != next / out ||
        (next + p.size / in * out) > tokens * tokens * out) {
      return Bad(absl::StrCat("attention of head ", p.layer, ".", p.head, " out of order (byte ",
                              p.offset, ")"));
    }
    const int64_t at = regions[attention_region].begin + slot * tokens * tokens * out + next;
    next += p.size / in * out;
    if (in == out) return Write(p.data, p.size, at);
    if (!float16) return Bad("float16 attention for a float32 export");
    const int64_t n = p.size / 4;
    halves.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, p.data + 4 * i, 4);
      halves[static_cast<size_t>(i)] = FloatToHalf(v);
    }
    return Write(reinterpret_cast<const char*>(halves.data()), 2 * n, at);
  }

  absl::Status AddHidden(const TensorPiece& p) {
    const int64_t s = p.layer;
    if (s < 0 || s > num_layers) return Bad(absl::StrCat("hidden state ", s));
    if (hidden_region < 0) {
      if (s != 0 || p.cols < 1) return Bad("a hidden state before the embeddings' (state 0)");
      width = p.cols;
      hidden_region = Place("hidden_states", "F32", {num_layers + 1, tokens, width},
                            (num_layers + 1) * tokens * width * 4);
    }
    int64_t& next = hidden_next[static_cast<size_t>(s)];
    const bool narrow = s == num_layers && p.cols < width;
    if (p.cols != width && !narrow) return Bad(absl::StrCat("hidden state ", s, " of width ", p.cols));
    if (p.offset != next || next + p.size > tokens * p.cols * 4) {
      return Bad(absl::StrCat("hidden state ", s, " out of order (byte ", p.offset, ")"));
    }
    next += p.size;
    if (!narrow) {
      return Write(p.data, p.size, regions[hidden_region].begin + s * tokens * width * 4 + p.offset);
    }
    if (final_region < 0) {
      final_region = Place("hidden_states_final", "F32", {tokens, p.cols}, tokens * p.cols * 4);
    }
    final_state.append(p.data, static_cast<size_t>(p.size));
    if (next < tokens * p.cols * 4) return absl::OkStatus();
    // Complete: exact in hidden_states_final, zero-padded in hidden_states.
    ATTNSCOPE_RETURN_IF_ERROR(Write(final_state.data(), next, regions[final_region].begin));
    std::string padded(static_cast<size_t>(tokens * width * 4), '\0');
    for (int64_t i = 0; i < tokens; ++i) {
      std::memcpy(padded.data() + i * width * 4, final_state.data() + i * p.cols * 4,
                  static_cast<size_t>(p.cols * 4));
    }
    std::string().swap(final_state);
    return Write(padded.data(), tokens * width * 4,
                 regions[hidden_region].begin + s * tokens * width * 4);
  }

  absl::Status AddLogits(const TensorPiece& p) {
    if (logits_region < 0) {
      if (hidden_region < 0 || hidden_next.back() == 0) {
        return Bad("logits before the last hidden state");
      }
      if (p.cols < 1) return Bad("logits of an empty vocabulary");
      ids_region = Place("input_ids", "I64", {tokens}, tokens * 8);
      logits_region = Place("logits", "F32", {tokens, p.cols}, tokens * p.cols * 4);
    }
    const Region& r = regions[logits_region];
    if (p.cols != r.shape[1] || p.offset != logits_next || logits_next + p.size > r.bytes) {
      return Bad(absl::StrCat("logits out of order (byte ", p.offset, ")"));
    }
    logits_next += p.size;
    return Write(p.data, p.size, r.begin + p.offset);
  }
};

absl::StatusOr<std::unique_ptr<ExportWriter>> ExportWriter::Create(const std::string& path,
                                                                   HeadSelection attention,
                                                                   int64_t num_layers,
                                                                   bool float16) {
  std::unique_ptr<ExportWriter> writer(new ExportWriter());
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->attention = std::move(attention);
  impl->num_layers = num_layers;
  impl->float16 = float16;
  const nlohmann::json metadata = {{"format", "pt"},
                                   {"producer", "attnscope"},
                                   {"attention_layers", FormatIndexList(impl->attention.layers)},
                                   {"attention_heads", FormatIndexList(impl->attention.heads)}};
  impl->metadata_json = metadata.dump();
  // Five entries of at most ~170 characters each, and the metadata.
  impl->header_reserve = (1024 + static_cast<int64_t>(impl->metadata_json.size()) + 7) / 8 * 8;
  impl->fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (impl->fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot write the export to ", path, ": ", std::strerror(errno)));
  }
  writer->impl_ = std::move(impl);
  return writer;
}

ExportWriter::~ExportWriter() {
  if (impl_ == nullptr || impl_->finished) return;
  if (impl_->fd >= 0) close(impl_->fd);
  unlink(impl_->path.c_str());
}

absl::Status ExportWriter::Add(const TensorPiece& piece) {
  Impl& m = *impl_;
  if (m.finished) return m.Bad("a piece after the end");
  if (absl::Status s = m.SetTokens(piece.rows); !s.ok()) return s;
  switch (piece.kind) {
    case TensorPiece::Kind::kAttention:
      return m.AddAttention(piece);
    case TensorPiece::Kind::kHiddenState:
      return m.AddHidden(piece);
    case TensorPiece::Kind::kLogits:
      return m.AddLogits(piece);
  }
  return m.Bad("an unknown piece");
}

absl::Status ExportWriter::Finish(const std::vector<int64_t>& ids) {
  Impl& m = *impl_;
  if (m.tokens < 0 || m.logits_region < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("export to ", m.path, ": the logits never arrived"));
  }
  if (static_cast<int64_t>(ids.size()) != m.tokens) {
    return m.Bad(absl::StrCat(ids.size(), " ids for tensors of ", m.tokens, " tokens"));
  }
  const int64_t out = m.float16 ? 2 : 4;
  for (size_t slot = 0; slot < m.attention_next.size(); ++slot) {
    if (m.attention_next[slot] != m.tokens * m.tokens * out) {
      const size_t heads = m.attention.heads.size();
      return absl::FailedPreconditionError(absl::StrCat(
          "export to ", m.path, ": the attention of head ", m.attention.layers[slot / heads], ".",
          m.attention.heads[slot % heads], " is incomplete"));
    }
  }
  for (int64_t s = 0; s <= m.num_layers; ++s) {
    const int64_t w = s == m.num_layers && m.final_region >= 0 ? m.regions[m.final_region].shape[1]
                                                               : m.width;
    if (m.hidden_next[static_cast<size_t>(s)] != m.tokens * w * 4) {
      return absl::FailedPreconditionError(
          absl::StrCat("export to ", m.path, ": hidden state ", s, " is incomplete"));
    }
  }
  if (m.logits_next != m.regions[m.logits_region].bytes) {
    return absl::FailedPreconditionError(absl::StrCat("export to ", m.path, ": incomplete logits"));
  }
  if (absl::Status s = m.Write(reinterpret_cast<const char*>(ids.data()), m.tokens * 8,
                               m.regions[m.ids_region].begin);
      !s.ok()) {
    return s;
  }
  nlohmann::json header = nlohmann::json::object();
  for (const Region& r : m.regions) {
    header[r.name] = {{"dtype", r.dtype}, {"shape", r.shape},
                      {"data_offsets", {r.begin, r.begin + r.bytes}}};
  }
  header["__metadata__"] = nlohmann::json::parse(m.metadata_json);
  std::string text = header.dump();
  if (static_cast<int64_t>(text.size()) > m.header_reserve) {
    return absl::InternalError(absl::StrCat("export to ", m.path, ": a header of ", text.size(),
                                            " bytes is over the ", m.header_reserve, " reserved"));
  }
  text.resize(static_cast<size_t>(m.header_reserve), ' ');
  uint64_t length = static_cast<uint64_t>(m.header_reserve);
  char prefix[8];
  std::memcpy(prefix, &length, 8);  // little-endian on the platforms we build for
  if (absl::Status s = m.Write(prefix, 8, -8 - m.header_reserve); !s.ok()) return s;
  if (absl::Status s = m.Write(text.data(), m.header_reserve, -m.header_reserve); !s.ok()) return s;
  if (ftruncate(m.fd, 8 + m.header_reserve + m.end) != 0 || close(m.fd) != 0) {
    m.fd = -1;
    return absl::InternalError(
        absl::StrCat("cannot write the export to ", m.path, ": ", std::strerror(errno)));
  }
  m.fd = -1;
  m.finished = true;
  return absl::OkStatus();
}

}  // namespace attnscope::engine
