#include "tests/rpc/test_certs.h"
#include "tests/common/temp_path.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace attnscope::testing {
namespace {

// A CA named `name` (self-signed, CA:TRUE) in dir/name.{key,pem}.
std::string MakeCa(const std::string& name) {
  return "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1"
         " -keyout " + name + ".key -out " + name + ".pem -subj /CN=attnscope-test-" + name +
         " -addext basicConstraints=critical,CA:TRUE"
         " -addext keyUsage=critical,keyCertSign,cRLSign && ";
}

// A certificate `name`.pem signed by `ca`, with the extensions in `ext`.
std::string MakeLeaf(const std::string& name, const std::string& ca, const std::string& cn,
                     const std::string& ext) {
  return "printf '" + ext + "' > " + name + ".ext && "
         "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
         ".key -out " + name + ".csr -subj /CN=" + cn + " && "
         "openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
         ".key -CAcreateserial -days 1 -out " + name + ".pem -extfile " + name + ".ext && ";
}

TestCerts Make() {
  TestCerts certs;
  char pattern[] = "/tmp/attnscope-certs-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return certs;
  const std::string dir = pattern;
  test::TempPathJanitor::Get().Add(dir);  // removed when the test process exits
  const std::string script =
      "cd " + dir + " && " + MakeCa("ca") + MakeCa("other-ca") +
      MakeLeaf("server", "ca", "localhost",
               "subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n") +
      MakeLeaf("wrong-name", "ca", "example.test",
               "subjectAltName=DNS:example.test\\nextendedKeyUsage=serverAuth\\n") +
      MakeLeaf("client", "ca", "attnscope-test-client", "extendedKeyUsage=clientAuth\\n") +
      MakeLeaf("other-client", "other-ca", "attnscope-test-intruder",
               "extendedKeyUsage=clientAuth\\n") +
      "true";
  const std::string command = "(" + script + ") > " + dir + "/openssl.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::ifstream log(dir + "/openssl.log");
    std::cerr << "openssl failed making test certificates:\n" << log.rdbuf() << "\n";
    return certs;
  }
  certs.dir = dir;
  certs.ca = dir + "/ca.pem";
  certs.server_cert = dir + "/server.pem";
  certs.server_key = dir + "/server.key";
  certs.client_cert = dir + "/client.pem";
  certs.client_key = dir + "/client.key";
  certs.other_ca = dir + "/other-ca.pem";
  certs.other_client_cert = dir + "/other-client.pem";
  certs.other_client_key = dir + "/other-client.key";
  certs.wrong_name_cert = dir + "/wrong-name.pem";
  certs.wrong_name_key = dir + "/wrong-name.key";
  return certs;
}

}  // namespace

const TestCerts& MakeTestCerts() {
  static const TestCerts certs = Make();
  return certs;
}

std::string WriteSecretFile(const std::string& name, const std::string& content) {
  const std::string path = MakeTestCerts().dir + "/" + name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  chmod(path.c_str(), 0600);
  return path;
}

}  // namespace attnscope::testing
