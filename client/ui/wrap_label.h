// A label for plain text of any length: status lines, notes, errors,
// generated text, model names.
#pragma once

#include <QColor>
#include <QLabel>

namespace attnscope::dashboard {

// Wraps at spaces and inside runs too long for a line (paths, unbroken
// generated token strings: breakLongRuns), so that however long the text,
// the label never asks its layout for more width than a short word's and
// never widens the window. Selectable with the mouse. line() is the text as
// set (without the break opportunities); setLine() shows it as plain text.
class WrapLabel : public QLabel {
  Q_OBJECT

 public:
  explicit WrapLabel(QWidget* parent = nullptr);

  void setLine(const QString& text);
  // setLine in the dashboard's colours: an error in red, else `normal`.
  void setMessage(const QString& text, bool isError, const QColor& normal = QColor(0x55, 0x55, 0x55));
  QString line() const { return m_line; }

 private:
  QString m_line;
};

}  // namespace attnscope::dashboard
