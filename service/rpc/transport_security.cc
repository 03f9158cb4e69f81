#include "service/rpc/transport_security.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/client_interceptor.h"

namespace attnscope::rpc {
namespace {

constexpr char kBearer[] = "Bearer ";

// Adds the bearer token to the initial metadata of every call.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token) : header_(kBearer + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

absl::Status BadFile(const std::string& flag, const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": ", why));
}

// Reads `path` when it is set; "" when it is not.
absl::StatusOr<std::string> ReadIfSet(const std::string& path, const std::string& flag) {
  if (path.empty()) return std::string();
  return ReadSecretFile(path, flag, /*pem=*/true);
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag,
                                           bool pem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return BadFile(flag, path, "cannot be read (missing, or no permission)");
  std::ostringstream text;
  text << in.rdbuf();
  std::string content = text.str();
  if (content.empty()) return BadFile(flag, path, "is empty");
  if (pem && content.find("-----BEGIN") == std::string::npos) {
    return BadFile(flag, path, "is not PEM (no '-----BEGIN' line); give a PEM file");
  }
  return content;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag,
                                          size_t min_bytes) {
  auto content = ReadSecretFile(path, flag, /*pem=*/false);
  if (!content.ok()) return content.status();
  std::string token(absl::StripAsciiWhitespace(content->substr(0, content->find('\n'))));
  if (token.empty()) return BadFile(flag, path, "holds no token on its first line");
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return BadFile(flag, path,
                     "the token holds a character outside printable ASCII; make one with "
                     "'openssl rand -hex 32'");
    }
  }
  if (token.size() < min_bytes) {
    return BadFile(flag, path,
                   absl::StrCat("the token has ", token.size(), " characters, fewer than ",
                                min_bytes, ": it could be guessed; make one with "
                                           "'openssl rand -hex 32'"));
  }
  return token;
}

absl::StatusOr<std::string> ClientToken(const std::string& token_file) {
  if (!token_file.empty()) return ReadTokenFile(token_file, "--auth-token-file");
  const char* env = std::getenv("ATTNSCOPE_TOKEN");
  if (env == nullptr || *env == '\0') return std::string();
  std::string token(absl::StripAsciiWhitespace(env));
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "ATTNSCOPE_TOKEN holds a character outside printable ASCII; fix the variable");
    }
  }
  return token;
}

absl::StatusOr<ServerSecurity> LoadServerSecurity(const std::string& cert_file,
                                                  const std::string& key_file,
                                                  const std::string& client_ca_file,
                                                  const std::string& token_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both (the certificate and its key) or "
        "neither");
  }
  if (!client_ca_file.empty() && cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs TLS: give --tls-cert and --tls-key as well");
  }
  ServerSecurity security;
  auto cert = ReadIfSet(cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadIfSet(key_file, "--tls-key");
  if (!key.ok()) return key.status();
  auto client_ca = ReadIfSet(client_ca_file, "--tls-client-ca");
  if (!client_ca.ok()) return client_ca.status();
  security.cert_pem = *std::move(cert);
  security.key_pem = *std::move(key);
  security.client_ca_pem = *std::move(client_ca);
  if (!token_file.empty()) {
    auto token = ReadTokenFile(token_file, "--auth-token-file", kMinTokenBytes);
    if (!token.ok()) return token.status();
    security.token = *std::move(token);
  }
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  if (security.tls_cert_file.empty() != security.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together: give both (the client certificate and its key) "
        "or neither");
  }
  grpc::SslCredentialsOptions options;
  // No CA file: the system's roots (a server with a public certificate).
  auto roots = ReadIfSet(security.tls_ca_file, "--tls-ca");
  if (!roots.ok()) return roots.status();
  options.pem_root_certs = *std::move(roots);
  auto cert = ReadIfSet(security.tls_cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadIfSet(security.tls_key_file, "--tls-key");
  if (!key.ok()) return key.status();
  options.pem_cert_chain = *std::move(cert);
  options.pem_private_key = *std::move(key);
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(creators));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const ServerSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.client_ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  // Every byte of `expected` is visited whatever `given` holds, and the
  // differences are OR-ed together: no early exit to time.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

absl::Status CheckBearerToken(const grpc::ServerContextBase& context,
                              const std::string& expected) {
  if (expected.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find("authorization");
  if (found == metadata.end()) {
    return absl::UnauthenticatedError(
        "this server requires a bearer token: send the metadata 'authorization: Bearer <token>' "
        "(attnscope --auth-token-file FILE or ATTNSCOPE_TOKEN; the dashboard's Settings > token "
        "file) with the token in the server's --auth-token-file");
  }
  const absl::string_view value(found->second.data(), found->second.size());
  constexpr size_t kPrefix = sizeof(kBearer) - 1;
  if (value.size() < kPrefix || !absl::EqualsIgnoreCase(value.substr(0, kPrefix), kBearer)) {
    return absl::UnauthenticatedError(
        "the 'authorization' metadata is not 'Bearer <token>'; send the token in that form");
  }
  const std::string_view given(value.data() + kPrefix, value.size() - kPrefix);
  if (!ConstantTimeEquals(given, expected)) {
    return absl::UnauthenticatedError(
        "the bearer token is wrong: it does not match the server's --auth-token-file; check "
        "the token file (or ATTNSCOPE_TOKEN) you gave");
  }
  return absl::OkStatus();
}

absl::Status ExplainTransportError(const absl::Status& status, const ClientSecurity& security) {
  if (!absl::IsUnavailable(status)) return status;
  const absl::string_view message = status.message();
  // OpenSSL spells its reasons in either case ("wrong version number",
  // "WRONG_VERSION_NUMBER") depending on the version.
  std::string lower = absl::AsciiStrToLower(message);
  for (char& c : lower) c = c == '_' ? ' ' : c;
  std::string hint;
  const size_t peer = lower.find("peer name ");
  if (peer != std::string::npos && absl::StrContains(lower, "is not in peer certificate")) {
    // "Peer name 127.0.0.1 is not in peer certificate": the name connected to.
    const size_t begin = peer + 10;
    const std::string name(message.substr(begin, lower.find(' ', begin) - begin));
    hint = absl::StrCat("the server's certificate does not name ", name,
                        ": connect with a name its subjectAltName lists, or give the server a "
                        "certificate for ", name);
  } else if (absl::StrContains(lower, "connection refused")) {
    hint = "nothing accepts connections at that address: is attnscope-server running there, on "
           "that port?";
  } else if (absl::StrContains(lower, "dns resolution failed") ||
             absl::StrContains(lower, "domain name not found")) {
    hint = "the host name does not resolve: check its spelling, or give an IP address";
  } else if (absl::StrContains(lower, "wrong version number") ||
      absl::StrContains(lower, "packet length too long")) {
    hint = "the server does not speak TLS: drop --tls-ca, or start it with --tls-cert/--tls-key";
  } else if (absl::StrContains(lower, "certificate verify failed")) {
    hint = absl::StrCat("the server's certificate is not signed by the CA in --tls-ca ",
                        security.tls_ca_file,
                        ", or does not name the host you connected to; give the CA that signed it");
  } else if (!security.tls()) {
    hint = "if the server uses TLS, give --tls-ca FILE (a plaintext client cannot talk to a TLS "
           "server)";
  } else if (security.tls_cert_file.empty()) {
    hint = "if the server requires client certificates (--tls-client-ca), give --tls-cert and "
           "--tls-key";
  } else {
    hint = "if the server requires client certificates, check that its --tls-client-ca signed "
           "--tls-cert";
  }
  return absl::Status(status.code(), absl::StrCat(message, " (", hint, ")"));
}

}  // namespace attnscope::rpc
