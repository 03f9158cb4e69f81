#include "client/models/attention_tensor.h"

#include <QFloat16>
#include <QtEndian>
#include <cmath>
#include <cstring>

#include "client/models/model_error.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

// Bytes per element, 0 for an unknown dtype.
int elementSize(int dtype) {
  switch (dtype) {
    case v1::TENSOR_DTYPE_UNSPECIFIED:
    case v1::TENSOR_DTYPE_FLOAT32:
      return 4;
    case v1::TENSOR_DTYPE_FLOAT16:
      return 2;
    default:
      return 0;
  }
}

QString chunkName(const v1::TensorChunk& chunk) {
  return QStringLiteral("attention chunk (layer %1, head %2, offset %3)")
      .arg(chunk.layer())
      .arg(chunk.head())
      .arg(chunk.offset());
}

float readElement(const char* p, int dtype) {
  if (elementSize(dtype) == 2) {
    const quint16 bits = qFromLittleEndian<quint16>(p);
    qfloat16 half;
    std::memcpy(static_cast<void*>(&half), &bits, sizeof(bits));  // qfloat16 is 16 raw bits
    return float(half);
  }
  const quint32 bits = qFromLittleEndian<quint32>(p);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

}  // namespace

bool AttentionTensorAssembly::checkHeader(const v1::TensorChunk& chunk, QString* error) const {
  const QString name = chunkName(chunk);
  if (chunk.name() != "attention") {
    return fail(error, name + QStringLiteral(": name '%1', expected 'attention'")
                                  .arg(QString::fromStdString(chunk.name())));
  }
  if (chunk.shape_size() != 2 || chunk.shape(0) != m_tokens || chunk.shape(1) != m_tokens) {
    QStringList dims;
    for (const qint64 d : chunk.shape()) dims << QString::number(d);
    return fail(error, name + QStringLiteral(": shape (%1), expected (%2, %2)")
                                  .arg(dims.join(QStringLiteral(", ")))
                                  .arg(m_tokens));
  }
  const int size = elementSize(chunk.dtype());
  if (size == 0) return fail(error, name + QStringLiteral(": unknown dtype %1").arg(chunk.dtype()));
  if (m_dtype >= 0 && elementSize(m_dtype) != size) {
    return fail(error, name + QStringLiteral(": dtype %1 differs from the first chunk's %2")
                                  .arg(chunk.dtype())
                                  .arg(m_dtype));
  }
  const qint64 expected = qint64(m_tokens) * m_tokens * size;
  if (chunk.total_bytes() != expected || expected > kMaxBytes) {
    return fail(error, name + QStringLiteral(": total_bytes %1, expected %2 (at most %3)")
                                  .arg(chunk.total_bytes())
                                  .arg(expected)
                                  .arg(kMaxBytes));
  }
  return true;
}

bool AttentionTensorAssembly::overlaps(qint64 begin, qint64 end) const {
  auto next = m_ranges.lower_bound(begin);
  if (next != m_ranges.end() && next->first < end) return true;
  if (next == m_ranges.begin()) return false;
  return std::prev(next)->second > begin;
}

bool AttentionTensorAssembly::addChunk(const v1::TensorChunk& chunk, QString* error) {
  if (isComplete())
    return fail(error, chunkName(chunk) + QStringLiteral(": tensor already complete"));
  if (!checkHeader(chunk, error)) return false;
  const qint64 begin = chunk.offset();
  const qint64 size = static_cast<qint64>(chunk.data().size());
  if (size == 0 || begin < 0 || begin > chunk.total_bytes() - size) {
    return fail(error, chunkName(chunk) + QStringLiteral(": bytes [%1, %2) outside [0, %3)")
                                              .arg(begin)
                                              .arg(begin + size)
                                              .arg(chunk.total_bytes()));
  }
  if (overlaps(begin, begin + size)) {
    return fail(
        error,
        chunkName(chunk) +
            QStringLiteral(": bytes [%1, %2) were already received").arg(begin).arg(begin + size));
  }
  if (m_dtype < 0) {
    m_dtype = chunk.dtype();
    m_total = chunk.total_bytes();
    m_bytes = QByteArray(m_total, '\0');
  }
  std::memcpy(m_bytes.data() + begin, chunk.data().data(), size);
  m_ranges.emplace(begin, begin + size);
  m_received += size;
  return true;
}

bool AttentionTensorAssembly::decode(QVector<float>* weights, QString* error) const {
  weights->clear();
  if (!isComplete()) return fail(error, QStringLiteral("attention tensor is incomplete"));
  const int size = elementSize(m_dtype);
  const qint64 count = m_total / size;
  QVector<float> out(count);
  for (qint64 i = 0; i < count; ++i) {
    out[i] = readElement(m_bytes.constData() + i * size, m_dtype);
    if (!std::isfinite(out[i])) {
      return fail(error, QStringLiteral("attention weight at (%1, %2) is not finite")
                             .arg(i / m_tokens)
                             .arg(i % m_tokens));
    }
  }
  *weights = std::move(out);
  return true;
}

}  // namespace attnscope::dashboard
