#include "client/ui/send_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace attnscope::dashboard {

SendPanel::SendPanel(QWidget* parent)
    : QWidget(parent),
      m_prompt(new QPlainTextEdit(this)),
      m_model(new QComboBox(this)),
      m_analyze(new QRadioButton(tr("&Analyze"), this)),
      m_generate(new QRadioButton(tr("&Generate"), this)),
      m_budget(new QSpinBox(this)),
      m_send(new QPushButton(tr("Send  (Ctrl+Return)"), this)) {
  setObjectName(QStringLiteral("sendPanel"));
  m_prompt->setObjectName(QStringLiteral("promptEdit"));
  m_model->setObjectName(QStringLiteral("sendModelCombo"));
  m_send->setObjectName(QStringLiteral("sendButton"));
  m_budget->setObjectName(QStringLiteral("budgetSpin"));
  m_prompt->setPlaceholderText(tr("Type a prompt, then Ctrl+Return"));
  m_prompt->setTabChangesFocus(true);
  m_prompt->setMaximumHeight(m_prompt->fontMetrics().height() * 5);
  m_model->addItem(tr("default model"), QString());
  m_analyze->setChecked(true);
  m_budget->setRange(1, 1024);
  m_budget->setValue(24);
  m_budget->setSuffix(tr(" tokens"));
  m_budget->setEnabled(false);
  auto* options = new QHBoxLayout;
  options->addWidget(m_model);
  options->addWidget(m_analyze);
  options->addWidget(m_generate);
  options->addWidget(m_budget);
  options->addStretch(1);
  options->addWidget(m_send);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_prompt);
  layout->addLayout(options);
  connect(m_generate, &QRadioButton::toggled, m_budget, &QSpinBox::setEnabled);
  connect(m_send, &QPushButton::clicked, this, &SendPanel::send);
}

void SendPanel::setPromptText(const QString& text) { m_prompt->setPlainText(text); }

void SendPanel::setGenerate(bool generate, int maxNewTokens) {
  (generate ? m_generate : m_analyze)->setChecked(true);
  if (maxNewTokens > 0) m_budget->setValue(maxNewTokens);
}

SendRequest SendPanel::currentRequest() const {
  return {m_prompt->toPlainText(), m_model->currentData().toString(), m_generate->isChecked(),
          m_budget->value()};
}

void SendPanel::send() {
  const SendRequest request = currentRequest();
  if (request.text.trimmed().isEmpty()) return;
  Q_EMIT sendRequested(request);
}

void SendPanel::setModels(const attnscope::v1::ListModelsResponse& models) {
  const QString current = m_model->currentData().toString();
  while (m_model->count() > 1) m_model->removeItem(1);
  for (const attnscope::v1::ModelInfo& info : models.models()) {
    const QString name = QString::fromStdString(info.name());
    m_model->addItem(QStringLiteral("%1 (%2 layers × %3 heads)")
                         .arg(name)
                         .arg(info.num_layers())
                         .arg(info.num_heads()),
                     name);
  }
  const int index = m_model->findData(current);
  m_model->setCurrentIndex(index >= 0 ? index : 0);
}

}  // namespace attnscope::dashboard
