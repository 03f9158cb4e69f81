// How a client reaches an attnscope-server: TLS files and a bearer token.
// Free of gRPC types, so the CLI can fill it in without gRPC's headers.
#pragma once

#include <string>

namespace attnscope::rpc {

// All empty: plaintext, no token.
struct ClientSecurity {
  std::string tls_ca_file;    // PEM roots that sign the server's certificate: TLS on
  std::string tls_cert_file;  // PEM client certificate for mutual TLS (with the key)
  std::string tls_key_file;   // PEM private key of tls_cert_file
  std::string token;          // sent as "authorization: Bearer <token>" on every call

  bool tls() const { return !tls_ca_file.empty() || !tls_cert_file.empty(); }
};

}  // namespace attnscope::rpc
