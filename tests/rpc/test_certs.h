// Certificates made at test time with the openssl command: a CA, a server
// certificate for 127.0.0.1 and localhost signed by it, a client
// certificate signed by it, and a second, unrelated CA (with its own client
// certificate) that must not be trusted. Plus bearer-token files.
#pragma once

#include <string>

namespace attnscope::testing {

struct TestCerts {
  std::string dir;          // a fresh temporary directory holding them all
  std::string ca;           // CA certificate (PEM)
  std::string server_cert;  // server certificate, SAN IP:127.0.0.1, DNS:localhost
  std::string server_key;
  std::string client_cert;  // client certificate signed by `ca`
  std::string client_key;
  std::string other_ca;           // an unrelated CA
  std::string other_client_cert;  // a client certificate signed by `other_ca`
  std::string other_client_key;
  std::string wrong_name_cert;  // a server certificate signed by `ca` for example.test only
  std::string wrong_name_key;
};

// Makes the certificates once per process (EC P-256 keys, valid for a day)
// and returns them. Empty `dir` (and a message on stderr) if openssl failed.
const TestCerts& MakeTestCerts();

// Writes `content` to a new file in the certificates' directory (mode 0600)
// and returns its path.
std::string WriteSecretFile(const std::string& name, const std::string& content);

}  // namespace attnscope::testing
