// The fixture of the TLS, token, limits and fault tests: the real server
// (RpcTest), the test-time certificates, and stubs on the channel every
// attnscope client uses (rpc::CreateClientChannel with a ClientSecurity).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "service/rpc/client_security.h"
#include "tests/rpc/rpc_test_util.h"
#include "tests/rpc/test_certs.h"

namespace attnscope::testing {

// The token the servers of these tests require (32 characters).
constexpr char kToken[] = "s3cr3t-t0ken-0123456789abcdefXYZ";

class RpcSecurityTest : public RpcTest {
 protected:
  void SetUp() override;

  const TestCerts& certs() const { return MakeTestCerts(); }
  // A file holding kToken and a newline.
  std::string TokenFile() const;
  // StartServer with `args`; stub_ stays a plaintext, tokenless stub.
  void StartSecureServer(const std::vector<std::string>& args) { StartServer(args); }
  // A stub to the server with `security` (ASSERTs the channel was made).
  std::unique_ptr<v1::Analyzer::Stub> SecureStub(const rpc::ClientSecurity& security) const;
  // ListModels and a short Analyze both succeed on `stub`.
  bool Serves(v1::Analyzer::Stub& stub) const;
  // The code of a ListModels call (10 s deadline).
  grpc::StatusCode ListModelsCode(v1::Analyzer::Stub& stub) const;
  // The final status of an Analyze of `text`.
  grpc::Status AnalyzeStatus(v1::Analyzer::Stub& stub, const std::string& text = "Hello") const;
};

}  // namespace attnscope::testing
