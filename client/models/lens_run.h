// One Lens call as the dashboard draws it (definitions.md, "Logit lens" and
// "Direct logit attribution"): the logit lens as a grid of hidden states
// (rows, 0 = the embeddings, L = after the final norm) by the positions read
// out (columns), and the direct logit attribution of one position as a grid
// of layers by heads with the MLPs in a last column. Filled from the RPC's
// events as they arrive (a state's cells may come in several pieces).
#pragma once

#include <QHash>
#include <QString>
#include <QStringList>
#include <QVector>

#include "attnscope/v1/attnscope.pb.h"

namespace attnscope::dashboard {

class LensRun {
 public:
  struct Cell {
    bool present = false;
    QString topToken;  // the most likely token, as it reads
    double topP = 0;   // its probability
    QString tooltip;   // every top token with its probability, next_p and rank, entropy
    double nextP = 0;  // the prompt's next token's probability (NaN at the last position)
    qint64 nextRank = -1;
    double entropy = 0;
  };

  // Applies one event of the Lens stream.
  void addEvent(const attnscope::v1::LensEvent& event);

  // The prompt's tokens as they read (from the tokens event).
  const QStringList& tokenTexts() const { return m_tokenTexts; }
  // Hidden states received so far have rows 0..states() - 1.
  int states() const { return m_states; }
  // The positions read out, in order (the columns), as the cells name them.
  const QVector<qint64>& positions() const { return m_positions; }
  // The cell of hidden state `state` at column `column` (absent: present false).
  Cell cell(int state, int column) const;
  // Cells received.
  int cellCount() const { return m_cells.size(); }

  // Direct logit attribution: the positions attributed, in arrival order.
  const QVector<attnscope::v1::PositionAttribution>& attributions() const { return m_attributions; }
  int numLayers() const { return m_numLayers; }
  int numHeads() const { return m_numHeads; }
  // Heads' and MLP's contributions of attribution `index` as a grid: row l
  // holds layer l's heads then its MLP (H + 1 columns); empty when absent.
  QVector<QVector<double>> attributionGrid(int index) const;
  // The largest |contribution| over the grid (0 when empty): the colour
  // scale's end.
  double attributionScale(int index) const;

  bool finished() const { return m_finished; }
  const attnscope::v1::LensSummary& summary() const { return m_summary; }

 private:
  QStringList m_tokenTexts;
  int m_states = 0;
  QVector<qint64> m_positions;
  QHash<qint64, int> m_columnOf;
  QHash<qint64, Cell> m_cells;  // key: state * columns + column, see cell()
  QVector<attnscope::v1::PositionAttribution> m_attributions;
  int m_numLayers = 0;
  int m_numHeads = 0;
  bool m_finished = false;
  attnscope::v1::LensSummary m_summary;
};

}  // namespace attnscope::dashboard
