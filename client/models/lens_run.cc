#include "client/models/lens_run.h"

#include <cmath>

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

qint64 cellKey(int state, int column) { return (qint64(state) << 32) | qint64(column); }

QString probability(double p) {
  if (!std::isfinite(p)) return QStringLiteral("–");
  return p >= 0.001 ? QString::number(p, 'f', 3) : QString::number(p, 'e', 1);
}

LensRun::Cell cellOf(const v1::LensCell& in, int state) {
  LensRun::Cell cell;
  cell.present = true;
  if (in.top_size() > 0) {
    cell.topToken = QString::fromStdString(in.top(0).token());
    cell.topP = in.top(0).p();
  } else {
    cell.topP = std::nan("");
  }
  cell.nextP = in.next_p();
  cell.nextRank = in.next_rank();
  cell.entropy = in.entropy();
  QStringList lines;
  lines << QStringLiteral("state %1, position %2").arg(state).arg(in.position());
  for (const v1::NextTokenPrediction& p : in.top()) {
    lines << QStringLiteral("  %1  %2").arg(probability(p.p()), QString::fromStdString(p.token()));
  }
  if (in.next_rank() >= 0) {
    lines << QStringLiteral("next token: p %1, rank %2").arg(probability(in.next_p())).arg(in.next_rank());
  }
  lines << QStringLiteral("entropy %1 nats").arg(in.entropy(), 0, 'f', 3);
  cell.tooltip = lines.join(QLatin1Char('\n'));
  return cell;
}

}  // namespace

void LensRun::addEvent(const v1::LensEvent& event) {
  switch (event.event_case()) {
    case v1::LensEvent::kTokens:
      m_tokenTexts.clear();
      for (const std::string& text : event.tokens().texts()) m_tokenTexts << QString::fromStdString(text);
      break;
    case v1::LensEvent::kLens: {
      const int state = event.lens().state();
      m_states = std::max(m_states, state + 1);
      for (const v1::LensCell& in : event.lens().cells()) {
        auto column = m_columnOf.find(in.position());
        if (column == m_columnOf.end()) {
          column = m_columnOf.insert(in.position(), int(m_positions.size()));
          m_positions << in.position();
        }
        m_cells.insert(cellKey(state, *column), cellOf(in, state));
      }
      break;
    }
    case v1::LensEvent::kAttribution: {
      const v1::PositionAttribution& a = event.attribution();
      m_attributions << a;
      if (a.mlp_size() > 0) {
        m_numLayers = a.mlp_size();
        m_numHeads = a.heads_size() / a.mlp_size();
      }
      break;
    }
    case v1::LensEvent::kSummary:
      m_summary = event.summary();
      m_numLayers = m_summary.num_layers();
      m_numHeads = m_summary.num_heads();
      m_finished = true;
      break;
    default:
      break;
  }
}

LensRun::Cell LensRun::cell(int state, int column) const {
  return m_cells.value(cellKey(state, column));
}

QVector<QVector<double>> LensRun::attributionGrid(int index) const {
  if (index < 0 || index >= m_attributions.size()) return {};
  const v1::PositionAttribution& a = m_attributions[index];
  const int layers = a.mlp_size();
  if (layers == 0 || a.heads_size() % layers != 0) return {};
  const int heads = a.heads_size() / layers;
  QVector<QVector<double>> grid(layers, QVector<double>(heads + 1));
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) grid[l][h] = a.heads(l * heads + h);
    grid[l][heads] = a.mlp(l);
  }
  return grid;
}

double LensRun::attributionScale(int index) const {
  double scale = 0;
  for (const QVector<double>& row : attributionGrid(index)) {
    for (const double v : row) {
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
    }
  }
  return scale;
}

}  // namespace attnscope::dashboard
