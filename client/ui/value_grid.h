// A grid of coloured cells with row and column labels, a legend and a
// tooltip per cell: the logit lens (hidden states x positions), the direct
// logit attribution (layers x heads and MLP) and a patching run (layers x
// heads or positions). Cells print their text where it fits; column labels
// are thinned to every k-th where they would overlap; the widget asks for
// little width, so it never widens the window.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

namespace attnscope::dashboard {

class ValueGrid : public QWidget {
  Q_OBJECT

 public:
  struct Cell {
    QColor color;     // invalid: not arrived (drawn blank)
    QString text;     // printed when it fits
    QString tooltip;
  };

  explicit ValueGrid(QWidget* parent = nullptr);

  // Replaces the grid: cells row-major, rows x columns.
  void setCells(int rows, int columns, const QVector<Cell>& cells);
  void setRowLabels(const QStringList& labels);
  void setColumnLabels(const QStringList& labels);
  // The legend under the grid: the caption, and a gradient from `low` to
  // `high` (a diverging scale when `middle` is not empty) with its labels.
  void setLegend(const QString& caption, const QColor& low, const QColor& high,
                 const QString& lowLabel, const QString& highLabel,
                 const QString& middle = QString());

  int rows() const { return m_rows; }
  int columns() const { return m_columns; }
  Cell cell(int row, int column) const;
  // Cells drawn with a colour (arrived).
  int filledCells() const;
  // The cell under a point of the widget, or (-1, -1).
  QPair<int, int> cellAt(const QPoint& point) const;
  // The column labels drawn (every k-th when they would overlap).
  int columnLabelStep() const;
  // The rectangle a cell is drawn in, for tests.
  QRect cellRect(int row, int column) const;

  QSize sizeHint() const override { return QSize(360, 240); }
  QSize minimumSizeHint() const override { return QSize(120, 120); }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QRect gridArea() const;

  int m_rows = 0;
  int m_columns = 0;
  QVector<Cell> m_cells;
  QStringList m_rowLabels;
  QStringList m_columnLabels;
  QString m_legendCaption;
  QColor m_low, m_high;
  QString m_lowLabel, m_highLabel, m_middleLabel;
};

}  // namespace attnscope::dashboard
