#include "client/models/patch_run.h"

#include <cmath>

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;

void PatchRun::addEvent(const v1::PatchEvent& event) {
  switch (event.event_case()) {
    case v1::PatchEvent::kBaseline:
      m_baseline = event.baseline();
      m_hasBaseline = true;
      m_rows = std::max(0, m_baseline.num_layers());
      m_columns = std::max(0, m_baseline.num_columns());
      m_recovery = QVector<double>(m_rows * m_columns, std::nan(""));
      m_metric = m_recovery;
      break;
    case v1::PatchEvent::kStep: {
      const v1::PatchStep& step = event.step();
      m_done = step.done();
      m_total = step.total();
      if (step.layer() < 0 || step.layer() >= m_rows || step.column() < 0 ||
          step.column() >= m_columns) {
        break;
      }
      const int at = step.layer() * m_columns + int(step.column());
      m_recovery[at] = step.recovery();
      m_metric[at] = step.metric();
      break;
    }
    case v1::PatchEvent::kSummary:
      m_summary = event.summary();
      m_finished = true;
      break;
    default:
      break;
  }
}

double PatchRun::recovery(int layer, int column) const {
  if (layer < 0 || layer >= m_rows || column < 0 || column >= m_columns) return std::nan("");
  return m_recovery[layer * m_columns + column];
}

double PatchRun::metric(int layer, int column) const {
  if (layer < 0 || layer >= m_rows || column < 0 || column >= m_columns) return std::nan("");
  return m_metric[layer * m_columns + column];
}

QString PatchRun::kindName() const {
  return m_baseline.kind() == v1::PATCH_KIND_RESIDUAL ? QStringLiteral("residual")
                                                      : QStringLiteral("heads");
}

QString PatchRun::columnLabel(int column) const {
  if (m_baseline.kind() != v1::PATCH_KIND_RESIDUAL) return QStringLiteral("H%1").arg(column);
  const v1::Tokens& tokens = m_baseline.corrupted();
  const QString text = column < tokens.texts_size()
                           ? QString::fromStdString(tokens.texts(column))
                           : QString();
  return QStringLiteral("%1 %2").arg(column).arg(text);
}

}  // namespace attnscope::dashboard
