// A plain gRPC client of the Analyzer service, separate from the dashboard:
// the "other users" whose requests the dashboard's feed must show.
#pragma once

#include <QString>
#include <QVector>
#include <memory>

#include "attnscope/v1/attnscope.grpc.pb.h"

namespace attnscope::dashboard::testing {

class PromptClient {
 public:
  explicit PromptClient(const QString& address);

  // Runs Analyze to the end (blocking). Returns the gRPC status as
  // "OK" or "CODE: message"; *events gets every event.
  QString analyze(const QString& text, QVector<attnscope::v1::AnalyzeEvent>* events,
                  bool withAttention = false);
  // Runs `request` as given (model, options, ids) to the end.
  QString analyzeRequest(const attnscope::v1::AnalyzeRequest& request,
                         QVector<attnscope::v1::AnalyzeEvent>* events);
  // Runs Generate to the end; *events gets every event.
  QString generate(const QString& text, int maxNewTokens,
                   QVector<attnscope::v1::GenerateEvent>* events);
  QString listModels(attnscope::v1::ListModelsResponse* models);

 private:
  std::unique_ptr<attnscope::v1::Analyzer::Stub> m_stub;
};

}  // namespace attnscope::dashboard::testing
