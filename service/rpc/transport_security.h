// TLS and bearer-token authentication for attnscope's gRPC connections, both
// sides. Free of libtorch and of the engine: the server, the CLI and the Qt
// dashboard all link it (attnscope_rpc_security), so the three read PEM and
// token files, and send or check the token, the same way.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "service/rpc/client_security.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace attnscope::rpc {

// Shortest token the server accepts: shorter ones can be guessed.
constexpr size_t kMinTokenBytes = 16;

// What the server enforces. Empty cert/key: plaintext; empty token: no auth.
struct ServerSecurity {
  std::string cert_pem;       // certificate chain presented to clients
  std::string key_pem;        // its private key
  std::string client_ca_pem;  // non-empty: clients must present a certificate it signed
  std::string token;          // non-empty: every Analyzer call must carry it

  bool tls() const { return !cert_pem.empty(); }
};

// The whole file at `path`. InvalidArgument naming `flag` and the path when
// it cannot be read, is empty, or (`pem`) holds no "-----BEGIN" block.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& flag,
                                           bool pem);

// The token in `path`: the file's first line without surrounding
// whitespace. InvalidArgument naming `flag` when the file cannot be read, the
// token is empty, holds characters outside printable ASCII (HTTP/2 header
// values), or is shorter than `min_bytes`.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag,
                                          size_t min_bytes = 1);

// The client's token: `token_file` when given, else $ATTNSCOPE_TOKEN, else
// "" (no token). Errors as ReadTokenFile (flag "--auth-token-file").
absl::StatusOr<std::string> ClientToken(const std::string& token_file);

// The server's side from its flags' files (any may be empty). InvalidArgument
// naming the flag for an unreadable file, a key without a certificate (or
// the reverse), a client CA without a certificate, or a token shorter than
// kMinTokenBytes.
absl::StatusOr<ServerSecurity> LoadServerSecurity(const std::string& cert_file,
                                                  const std::string& key_file,
                                                  const std::string& client_ca_file,
                                                  const std::string& token_file);

// TLS credentials from the PEM files of `security`, or insecure ones when it
// has no TLS. InvalidArgument naming the flag of a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientSecurity& security);

// A channel to `target` with `credentials` and `args`; when `token` is not
// empty every call on it carries "authorization: Bearer <token>" (also over
// plaintext, for a server behind a TLS-terminating proxy).
std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token);

// The server's credentials: TLS (requiring and verifying a client
// certificate when client_ca_pem is set) or insecure.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const ServerSecurity& security);

// Whether `given` equals `expected`, in a time that depends only on the two
// lengths, never on where they first differ.
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

// OK when `expected` is empty or the call's "authorization" metadata is
// "Bearer <expected>"; else Unauthenticated saying what was missing or wrong
// and how to send the token.
absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& expected);

// A client-side error made actionable: a failure to connect gets a hint
// about TLS (a plaintext client to a TLS server, a certificate the CA does
// not sign, a refused client certificate); others come back unchanged.
absl::Status ExplainTransportError(const absl::Status& status, const ClientSecurity& security);

}  // namespace attnscope::rpc
