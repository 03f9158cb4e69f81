// Reassembles one raw attention tensor from the TensorChunks of an Analyze
// stream (each chunk a byte range of the row-major tensor).
#pragma once

#include <QByteArray>
#include <QString>
#include <QVector>
#include <map>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

// A (T, T) attention tensor (rows = queries, columns = keys) being filled
// from chunks that may arrive in any order of offset.
class AttentionTensorAssembly {
 public:
  // Tensors larger than this are refused rather than allocated.
  static constexpr qint64 kMaxBytes = qint64(256) << 20;

  // tokens: T of the prompt; every chunk must describe a (T, T) tensor.
  explicit AttentionTensorAssembly(int tokens) : m_tokens(tokens) {}

  // Adds one chunk. Returns false (and sets *error) without changing anything
  // when the chunk's name is not "attention", its shape is not (T, T), its
  // dtype or total_bytes differ from the first chunk's or from T*T*element
  // size, its byte range is empty, negative, beyond total_bytes or overlaps
  // bytes already received, or the tensor is already complete.
  bool addChunk(const attnscope::v1::TensorChunk& chunk, QString* error);

  // True once every byte has arrived.
  bool isComplete() const { return m_total > 0 && m_received == m_total; }

  // The T*T weights, row-major, as float32 (float16 converted). Empty until
  // complete. Fails (false, *error) if a weight is NaN or infinite.
  bool decode(QVector<float>* weights, QString* error) const;

 private:
  bool checkHeader(const attnscope::v1::TensorChunk& chunk, QString* error) const;
  bool overlaps(qint64 begin, qint64 end) const;

  int m_tokens = 0;
  int m_dtype = -1;  // attnscope::v1::TensorDtype, fixed by the first chunk
  qint64 m_total = 0;
  qint64 m_received = 0;
  QByteArray m_bytes;
  std::map<qint64, qint64> m_ranges;  // begin -> end of received byte ranges
};

}  // namespace attnscope::dashboard
