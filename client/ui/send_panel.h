// Sending a prompt from the dashboard: analyze it, or generate from it with
// a token budget.
#pragma once

#include <QWidget>

#include "attnscope/v1/attnscope.pb.h"

class QComboBox;
class QPlainTextEdit;
class QPushButton;
class QRadioButton;
class QSpinBox;

namespace attnscope::dashboard {

struct SendRequest {
  QString text;
  QString model;  // empty: the server's default
  bool generate = false;
  int maxNewTokens = 0;  // when generating
};

class SendPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SendPanel(QWidget* parent = nullptr);

  QPlainTextEdit* promptEdit() const { return m_prompt; }
  void setPromptText(const QString& text);
  void setGenerate(bool generate, int maxNewTokens = 0);
  // The request the panel would send now.
  SendRequest currentRequest() const;

 public Q_SLOTS:
  // Emits sendRequested unless the prompt is empty.
  void send();
  void setModels(const attnscope::v1::ListModelsResponse& models);

 Q_SIGNALS:
  void sendRequested(const attnscope::dashboard::SendRequest& request);

 private:
  QPlainTextEdit* m_prompt;
  QComboBox* m_model;
  QRadioButton* m_analyze;
  QRadioButton* m_generate;
  QSpinBox* m_budget;
  QPushButton* m_send;
};

}  // namespace attnscope::dashboard
