#include "tests/client/prompt_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

namespace attnscope::dashboard::testing {
namespace {

namespace v1 = attnscope::v1;

QString describe(const grpc::Status& status) {
  if (status.ok()) return QStringLiteral("OK");
  return QStringLiteral("%1: %2")
      .arg(int(status.error_code()))
      .arg(QString::fromStdString(status.error_message()));
}

void setDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

}  // namespace

PromptClient::PromptClient(const QString& address)
    : m_stub(v1::Analyzer::NewStub(
          grpc::CreateChannel(address.toStdString(), grpc::InsecureChannelCredentials()))) {}

QString PromptClient::analyze(const QString& text, QVector<v1::AnalyzeEvent>* events,
                              bool withAttention) {
  grpc::ClientContext context;
  setDeadline(&context);
  v1::AnalyzeRequest request;
  request.set_text(text.toStdString());
  request.mutable_options()->set_return_attention(withAttention);
  auto reader = m_stub->Analyze(&context, request);
  v1::AnalyzeEvent event;
  while (reader->Read(&event)) events->append(event);
  return describe(reader->Finish());
}

QString PromptClient::analyzeRequest(const v1::AnalyzeRequest& request,
                                     QVector<v1::AnalyzeEvent>* events) {
  grpc::ClientContext context;
  setDeadline(&context);
  auto reader = m_stub->Analyze(&context, request);
  v1::AnalyzeEvent event;
  while (reader->Read(&event)) events->append(event);
  return describe(reader->Finish());
}

QString PromptClient::generate(const QString& text, int maxNewTokens,
                               QVector<v1::GenerateEvent>* events) {
  grpc::ClientContext context;
  setDeadline(&context);
  v1::GenerateRequest request;
  request.set_text(text.toStdString());
  request.set_max_new_tokens(maxNewTokens);
  auto reader = m_stub->Generate(&context, request);
  v1::GenerateEvent event;
  while (reader->Read(&event)) events->append(event);
  return describe(reader->Finish());
}

QString PromptClient::listModels(v1::ListModelsResponse* models) {
  grpc::ClientContext context;
  setDeadline(&context);
  return describe(m_stub->ListModels(&context, v1::ListModelsRequest(), models));
}

}  // namespace attnscope::dashboard::testing
