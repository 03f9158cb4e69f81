#include "client/ui/send_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "client/models/token_ids.h"
#include "client/ui/wrap_label.h"

namespace attnscope::dashboard {

SendPanel::SendPanel(QWidget* parent)
    : QWidget(parent),
      m_prompt(new QPlainTextEdit(this)),
      m_model(new QComboBox(this)),
      m_analyze(new QRadioButton(tr("&Analyze"), this)),
      m_generate(new QRadioButton(tr("&Generate"), this)),
      m_evict(new QRadioButton(tr("&Evaluate eviction"), this)),
      m_budget(new QSpinBox(this)),
      m_policies(new QLineEdit(QString::fromLatin1(kDefaultPolicies), this)),
      m_positions(new QComboBox(this)),
      m_send(new QPushButton(tr("Send  (Ctrl+Return)"), this)),
      m_ids(new QCheckBox(tr("token &ids"), this)),
      m_chat(new QCheckBox(tr("c&hat"), this)),
      m_generationPrompt(new QCheckBox(tr("+ reply &header"), this)),
      m_status(new WrapLabel(this)) {
  setObjectName(QStringLiteral("sendPanel"));
  m_prompt->setObjectName(QStringLiteral("promptEdit"));
  m_model->setObjectName(QStringLiteral("sendModelCombo"));
  m_send->setObjectName(QStringLiteral("sendButton"));
  m_budget->setObjectName(QStringLiteral("budgetSpin"));
  m_evict->setObjectName(QStringLiteral("evictionRadio"));
  m_evict->setToolTip(
      tr("Read the prompt one token at a time under each KV-cache eviction policy and "
         "score every next token (EvaluateEviction); the run is drawn on the right"));
  m_policies->setObjectName(QStringLiteral("evictionPoliciesEdit"));
  m_policies->setToolTip(
      tr("Policies, separated by commas or spaces: full, window:R, sinks:S+R, "
         "detected:K+R, heavy:K+R (1 to 16)"));
  m_positions->setObjectName(QStringLiteral("evictionPositionsCombo"));
  m_positions->addItem(tr("model's positions"), QString());
  m_positions->addItem(tr("cache positions"), QStringLiteral("cache"));
  m_positions->addItem(tr("original positions"), QStringLiteral("original"));
  m_positions->setToolTip(
      tr("Positions the kept keys are scored at: renumbered within the cache, or their "
         "original text positions (default: cache for rotary models, original for "
         "learned absolute positions)"));
  m_ids->setObjectName(QStringLiteral("tokenIdsCheck"));
  m_ids->setToolTip(
      tr("The prompt box holds token ids separated by commas or spaces "
         "(for checkpoints without a tokenizer)"));
  m_chat->setObjectName(QStringLiteral("chatCheck"));
  m_chat->setToolTip(
      tr("The prompt box holds a conversation, one message per 'role: content' line "
         "(continued on the lines below it), or JSON [{\"role\": …, \"content\": …}] "
         "(or {\"messages\": […], \"chat_template_kwargs\": {\"enable_thinking\": false}, "
         "\"tools\": […]}); the server renders it with the model's chat template"));
  m_generationPrompt->setObjectName(QStringLiteral("generationPromptCheck"));
  m_generationPrompt->setToolTip(
      tr("End the rendered chat with the assistant's header (add_generation_prompt), "
         "as a model sees it before it replies"));
  m_generationPrompt->setVisible(false);
  m_status->setObjectName(QStringLiteral("sendStatus"));
  m_prompt->setPlaceholderText(tr("Type a prompt, then Ctrl+Return"));
  m_prompt->setTabChangesFocus(true);
  m_prompt->setMaximumHeight(m_prompt->fontMetrics().height() * 5);
  m_model->addItem(tr("default model"), QString());
  m_analyze->setChecked(true);
  m_budget->setRange(1, 1024);
  m_budget->setValue(24);
  m_budget->setSuffix(tr(" tokens"));
  layOut();
  updateModeWidgets();
  for (QRadioButton* mode : {m_analyze, m_generate, m_evict})
    connect(mode, &QRadioButton::toggled, this, &SendPanel::updateModeWidgets);
  connect(m_ids, &QCheckBox::toggled, this, [this](bool ids) {
    if (ids) m_chat->setChecked(false);
    updatePlaceholder();
  });
  connect(m_chat, &QCheckBox::toggled, this, [this](bool chat) {
    if (chat) m_ids->setChecked(false);
    m_generationPrompt->setVisible(chat);
    updatePlaceholder();
  });
  connect(m_send, &QPushButton::clicked, this, &SendPanel::send);
}

void SendPanel::layOut() {
  auto* options = new QHBoxLayout;
  options->addWidget(m_model);
  options->addWidget(m_analyze);
  options->addWidget(m_generate);
  options->addWidget(m_budget);
  options->addWidget(m_ids);
  options->addWidget(m_chat);
  options->addWidget(m_generationPrompt);
  options->addStretch(1);
  options->addWidget(m_send);
  auto* eviction = new QHBoxLayout;
  eviction->addWidget(m_evict);
  eviction->addWidget(m_policies, 1);
  eviction->addWidget(m_positions);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_prompt);
  layout->addLayout(options);
  layout->addLayout(eviction);
  layout->addWidget(m_status);
}

void SendPanel::setPromptText(const QString& text) { m_prompt->setPlainText(text); }

void SendPanel::setGenerate(bool generate, int maxNewTokens) {
  (generate ? m_generate : m_analyze)->setChecked(true);
  if (maxNewTokens > 0) m_budget->setValue(maxNewTokens);
}

void SendPanel::setEvaluateEviction(bool evaluate) {
  (evaluate ? m_evict : m_analyze)->setChecked(true);
}

bool SendPanel::isEvaluateEviction() const { return m_evict->isChecked(); }

void SendPanel::setEvictionPolicies(const QString& policies) { m_policies->setText(policies); }

void SendPanel::setEvictionPositions(const QString& positions) {
  const int index = m_positions->findData(positions);
  m_positions->setCurrentIndex(index >= 0 ? index : 0);
}

void SendPanel::updateModeWidgets() {
  const bool evict = m_evict->isChecked();
  m_budget->setEnabled(m_generate->isChecked());
  m_policies->setEnabled(evict);
  m_positions->setEnabled(evict);
  // EvaluateEviction reads text or token ids, not a conversation.
  if (evict) m_chat->setChecked(false);
  m_chat->setEnabled(!evict);
}

void SendPanel::setTokenIds(bool ids) { m_ids->setChecked(ids); }

bool SendPanel::isTokenIds() const { return m_ids->isChecked(); }

void SendPanel::setChat(bool chat, bool addGenerationPrompt) {
  m_chat->setChecked(chat);
  m_generationPrompt->setChecked(addGenerationPrompt);
}

bool SendPanel::isChat() const { return m_chat->isChecked(); }

void SendPanel::updatePlaceholder() {
  if (m_ids->isChecked()) {
    m_prompt->setPlaceholderText(tr("Token ids, e.g. 50256, 464, 3797, then Ctrl+Return"));
  } else if (m_chat->isChecked()) {
    m_prompt->setPlaceholderText(
        tr("system: Be brief\nuser: Name a colour\n(or JSON [{\"role\": …, \"content\": …}]), "
           "then Ctrl+Return"));
  } else {
    m_prompt->setPlaceholderText(tr("Type a prompt, then Ctrl+Return"));
  }
}

SendRequest SendPanel::currentRequest(QString* error) const {
  SendRequest request;
  request.text = m_prompt->toPlainText();
  request.model = model();
  request.generate = m_generate->isChecked();
  request.maxNewTokens = m_budget->value();
  request.evaluateEviction = m_evict->isChecked();
  if (request.evaluateEviction) {
    static const QRegularExpression separators(QStringLiteral("[,\\s]+"));
    request.policies = m_policies->text().split(separators, Qt::SkipEmptyParts);
    request.positions = m_positions->currentData().toString();
    if (request.policies.isEmpty()) {
      if (error != nullptr) {
        *error = tr("eviction: give at least one policy, e.g. %1")
                     .arg(QString::fromLatin1(kDefaultPolicies));
      }
      return SendRequest();
    }
  }
  if (m_ids->isChecked()) {
    QString problem;
    if (!parseTokenIds(request.text, &request.ids, &problem, m_vocab.value(request.model, 0))) {
      if (error != nullptr) *error = problem;
      return SendRequest();
    }
  }
  if (m_chat->isChecked()) {
    QString problem;
    if (!parseChat(request.text, &request.chat.messages, &problem, &request.chat.templateKwargs)) {
      if (error != nullptr) *error = problem;
      return SendRequest();
    }
    request.chat.addGenerationPrompt = m_generationPrompt->isChecked();
  }
  return request;
}

void SendPanel::send() {
  if (m_prompt->toPlainText().trimmed().isEmpty()) return;
  QString error;
  const SendRequest request = currentRequest(&error);
  if (!error.isEmpty()) {
    setStatus(error, true);
    return;
  }
  setStatus(request.evaluateEviction ? tr("sent: evaluating eviction…")
            : request.generate         ? tr("sent: generating…")
                                       : tr("sent: analyzing…"));
  Q_EMIT sendRequested(request);
}

void SendPanel::setStatus(const QString& text, bool isError) {
  m_status->setMessage(text, isError);
}

QString SendPanel::statusText() const { return m_status->line(); }

void SendPanel::setModels(const attnscope::v1::ListModelsResponse& models) {
  const QString current = m_model->currentData().toString();
  while (m_model->count() > 1) m_model->removeItem(1);
  m_vocab.clear();
  for (const attnscope::v1::ModelInfo& info : models.models()) {
    const QString name = QString::fromStdString(info.name());
    m_vocab.insert(name, info.vocab_size());
    // The server's default model is the first it lists.
    if (m_vocab.size() == 1) m_vocab.insert(QString(), info.vocab_size());
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

namespace attnscope::dashboard {

QString SendPanel::model() const { return m_model->currentData().toString(); }

}  // namespace attnscope::dashboard
