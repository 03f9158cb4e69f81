#include "tests/rpc/rpc_security_fixture.h"

#include <chrono>

#include "service/rpc/client_channel.h"

namespace attnscope::testing {

void RpcSecurityTest::SetUp() {
  ASSERT_FALSE(certs().dir.empty()) << "openssl could not make the test certificates";
}

std::string RpcSecurityTest::TokenFile() const {
  return WriteSecretFile("token", std::string(kToken) + "\n");
}

std::unique_ptr<v1::Analyzer::Stub> RpcSecurityTest::SecureStub(
    const rpc::ClientSecurity& security) const {
  auto channel = rpc::CreateClientChannel(server_->address(), security);
  EXPECT_TRUE(channel.ok()) << channel.status();
  if (!channel.ok()) return nullptr;
  return v1::Analyzer::NewStub(*channel);
}

bool RpcSecurityTest::Serves(v1::Analyzer::Stub& stub) const {
  if (ListModelsCode(stub) != grpc::StatusCode::OK) return false;
  const AnalyzeResult result = RunAnalyze(stub, TextRequest("Still here?"));
  return result.status.ok() && !result.events.empty() && result.events.back().has_summary();
}

grpc::StatusCode RpcSecurityTest::ListModelsCode(v1::Analyzer::Stub& stub) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListModelsResponse models;
  return stub.ListModels(&context, v1::ListModelsRequest(), &models).error_code();
}

grpc::Status RpcSecurityTest::AnalyzeStatus(v1::Analyzer::Stub& stub,
                                            const std::string& text) const {
  return RunAnalyze(stub, TextRequest(text), 60).status;
}

}  // namespace attnscope::testing
