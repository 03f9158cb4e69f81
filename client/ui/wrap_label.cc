#include "client/ui/wrap_label.h"

#include "client/models/token_labels.h"

namespace attnscope::dashboard {

WrapLabel::WrapLabel(QWidget* parent) : QLabel(parent) {
  setTextFormat(Qt::PlainText);
  setWordWrap(true);
  setTextInteractionFlags(Qt::TextSelectableByMouse);
}

void WrapLabel::setLine(const QString& text) {
  m_line = text;
  setText(breakLongRuns(text, 24));
}

void WrapLabel::setMessage(const QString& text, bool isError, const QColor& normal) {
  setLine(text);
  setStyleSheet(QStringLiteral("color: %1;").arg(isError ? QStringLiteral("#c62828") : normal.name()));
}

}  // namespace attnscope::dashboard
