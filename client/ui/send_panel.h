// Sending a prompt from the dashboard: analyze it, generate from it with a
// token budget, or evaluate KV-cache eviction policies on it (the
// StreamingLLM experiment: EvaluateEviction). The prompt box holds text,
// token ids, or a chat conversation (rendered with the model's chat template
// by the server; Analyze and Generate only).
#pragma once

#include <QMap>
#include <QString>
#include <QVector>
#include <QWidget>

#include "attnscope/v1/attnscope.pb.h"
#include "client/models/chat_input.h"
#include "client/ui/wrap_label.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QRadioButton;
class QSpinBox;

namespace attnscope::dashboard {

struct SendRequest {
  QString text;         // the prompt, or (ids) the ids as typed
  QVector<qint64> ids;  // token ids instead of text (non-empty: send these)
  ChatInput chat;       // a conversation instead of text (non-empty: send this)
  QString model;  // empty: the server's default
  bool generate = false;
  int maxNewTokens = 0;  // when generating
  // EvaluateEviction instead (text or ids, never a chat): its policies in
  // order ("full", "window:64", "sinks:4+60", ...; checked by the server)
  // and positions ("cache", "original"; empty: the model's default).
  bool evaluateEviction = false;
  QStringList policies;
  QString positions;
};

class SendPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SendPanel(QWidget* parent = nullptr);

  QPlainTextEdit* promptEdit() const { return m_prompt; }
  void setPromptText(const QString& text);
  void setGenerate(bool generate, int maxNewTokens = 0);
  // Evaluate eviction mode (off: Analyze). Its policies are typed separated
  // by commas or spaces; positions: "", "cache" or "original".
  void setEvaluateEviction(bool evaluate);
  bool isEvaluateEviction() const;
  void setEvictionPolicies(const QString& policies);
  void setEvictionPositions(const QString& positions);
  QLineEdit* policiesEdit() const { return m_policies; }
  static constexpr const char* kDefaultPolicies = "full window:64 sinks:4+60 detected:4+60";
  // Whether the prompt box holds token ids ("464, 3797, 3332").
  void setTokenIds(bool ids);
  bool isTokenIds() const;
  // Whether the prompt box holds a conversation (see chat_input.h), and
  // whether it is sent ending with the assistant's header. Chat and token
  // ids exclude each other; EvaluateEviction takes no chat.
  void setChat(bool chat, bool addGenerationPrompt = false);
  bool isChat() const;
  // The request the panel would send now (ids or the chat parsed in those
  // modes, the policies split; *error set and an empty request when they do
  // not parse or no policy is given).
  SendRequest currentRequest(QString* error = nullptr) const;
  // The model chosen (empty: the server's default).
  QString model() const;
  // The line under the prompt: what the last send is doing, or why it failed.
  QString statusText() const;
  WrapLabel* statusLabel() const { return m_status; }

 public Q_SLOTS:
  // Emits sendRequested unless the prompt is empty; ids or a chat that do not
  // parse are reported in the status line and nothing is sent.
  void send();
  // Shows `text` in the status line, red when it is an error.
  void setStatus(const QString& text, bool isError = false);
  void setModels(const attnscope::v1::ListModelsResponse& models);

 Q_SIGNALS:
  void sendRequested(const attnscope::dashboard::SendRequest& request);

 private:
  void layOut();
  void updatePlaceholder();
  void updateModeWidgets();

  QPlainTextEdit* m_prompt;
  QComboBox* m_model;
  QRadioButton* m_analyze;
  QRadioButton* m_generate;
  QRadioButton* m_evict;
  QSpinBox* m_budget;
  QLineEdit* m_policies;
  QComboBox* m_positions;
  QPushButton* m_send;
  QCheckBox* m_ids;
  QCheckBox* m_chat;
  QCheckBox* m_generationPrompt;
  WrapLabel* m_status;
  QMap<QString, qint64> m_vocab;  // model name -> vocabulary size ("" = default)
};

}  // namespace attnscope::dashboard
