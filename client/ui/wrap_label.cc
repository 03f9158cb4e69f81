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

}  // namespace attnscope::dashboard
