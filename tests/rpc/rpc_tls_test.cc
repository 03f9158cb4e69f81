// TLS, mutual TLS and bearer tokens on the real server, with certificates
// made at test time by openssl, through the channel every attnscope client
// uses (rpc::CreateClientChannel) and through the attnscope CLI.
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "service/rpc/client_channel.h"
#include "tests/cli/run_cli.h"
#include "tests/rpc/rpc_security_fixture.h"

namespace attnscope::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(RpcSecurityTest, TlsServesTheApiTheCliAndHealth) {
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key});
  rpc::ClientSecurity tls;
  tls.tls_ca_file = certs().ca;
  auto stub = SecureStub(tls);
  EXPECT_TRUE(Serves(*stub));
  EXPECT_THAT(server_->Stderr(), HasSubstr("gRPC over TLS, no token required"));

  const CliResult analyzed = RunCli({"--server", server_->address(), "--tls-ca", certs().ca,
                                     "analyze", "--text", "Over TLS", "--json"});
  EXPECT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_THAT(analyzed.out, HasSubstr("\"tokens\":[\"Over\""));
  const CliResult health =
      RunCli({"--server", server_->address(), "--tls-ca", certs().ca, "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
  // "localhost" is in the certificate too.
  const std::string by_name = "localhost:" + server_->address().substr(10);
  const CliResult named = RunCli({"--server", by_name, "--tls-ca", certs().ca, "models"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  EXPECT_THAT(named.out, HasSubstr("tiny-gpt2"));
}

TEST_F(RpcSecurityTest, PlaintextClientToTlsServerFailsWithAHint) {
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key});
  const CliResult plain = RunCli({"--server", server_->address(), "models"});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_THAT(plain.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(plain.err, HasSubstr("if the server uses TLS, give --tls-ca FILE"));
  // The plaintext stub of the fixture fails the same way, and the server
  // keeps serving TLS clients.
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  EXPECT_EQ(NewStub(server_->address())->ListModels(&context, {}, &models).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  rpc::ClientSecurity tls;
  tls.tls_ca_file = certs().ca;
  EXPECT_TRUE(Serves(*SecureStub(tls)));
}

TEST_F(RpcSecurityTest, ACaThatDidNotSignTheServerIsRefused) {
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key});
  const CliResult wrong =
      RunCli({"--server", server_->address(), "--tls-ca", certs().other_ca, "models"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(wrong.err, HasSubstr("is not signed by the CA in --tls-ca " + certs().other_ca));
}

// The hints name the failure: a certificate for another name (not "give
// --tls-cert"), nothing listening, a name that does not resolve (not "give
// --tls-ca"). gRPC's own log lines stay off stderr unless --verbose.
TEST_F(RpcSecurityTest, ConnectionFailuresAreExplainedByWhatFailed) {
  StartSecureServer({"--tls-cert", certs().wrong_name_cert, "--tls-key", certs().wrong_name_key});
  const CliResult named =
      RunCli({"--server", server_->address(), "--tls-ca", certs().ca, "models"});
  EXPECT_EQ(named.exit_code, 1);
  EXPECT_THAT(named.err, HasSubstr("the server's certificate does not name 127.0.0.1"));
  EXPECT_THAT(named.err, Not(HasSubstr("--tls-cert")));

  const CliResult wrong_ca =
      RunCli({"--server", server_->address(), "--tls-ca", certs().other_ca, "models"});
  EXPECT_EQ(wrong_ca.exit_code, 1);
  EXPECT_THAT(wrong_ca.err, HasSubstr("is not signed by the CA in --tls-ca"));
  EXPECT_THAT(wrong_ca.err, Not(HasSubstr("Handshake failed")));  // gRPC's E-line
  EXPECT_EQ(std::count(wrong_ca.err.begin(), wrong_ca.err.end(), '\n'), 1) << wrong_ca.err;
  const CliResult verbose = RunCli(
      {"--verbose", "--server", server_->address(), "--tls-ca", certs().other_ca, "models"});
  EXPECT_EQ(verbose.exit_code, 1);
  EXPECT_THAT(verbose.err, HasSubstr("Handshake failed"));

  // A port nothing listens on: the server's own port once it has stopped.
  const std::string address = server_->address();
  server_.reset();
  for (const std::vector<std::string>& security :
       {std::vector<std::string>{}, std::vector<std::string>{"--tls-ca", certs().ca}}) {
    std::vector<std::string> args = {"--server", address};
    args.insert(args.end(), security.begin(), security.end());
    args.push_back("models");
    const CliResult refused = RunCli(args);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_THAT(refused.err, HasSubstr("nothing accepts connections at that address"));
    EXPECT_THAT(refused.err, Not(HasSubstr("give --tls")));
  }
  const CliResult unresolved = RunCli({"--server", "no-such-host.invalid:50051", "models"});
  EXPECT_EQ(unresolved.exit_code, 1);
  EXPECT_THAT(unresolved.err, HasSubstr("the host name does not resolve"));
  EXPECT_THAT(unresolved.err, Not(HasSubstr("give --tls")));
}

TEST_F(RpcSecurityTest, TlsClientToPlaintextServerSaysSo) {
  StartSecureServer({});
  const CliResult tls = RunCli({"--server", server_->address(), "--tls-ca", certs().ca, "models"});
  EXPECT_EQ(tls.exit_code, 1);
  EXPECT_THAT(tls.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(tls.err, HasSubstr("the server does not speak TLS"));
}

TEST_F(RpcSecurityTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key,
                     "--tls-client-ca", certs().ca});
  EXPECT_THAT(server_->Stderr(), HasSubstr("mutual TLS (client certificates required)"));
  rpc::ClientSecurity no_cert;
  no_cert.tls_ca_file = certs().ca;
  EXPECT_EQ(ListModelsCode(*SecureStub(no_cert)), grpc::StatusCode::UNAVAILABLE);
  const CliResult cli = RunCli({"--server", server_->address(), "--tls-ca", certs().ca, "models"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_THAT(cli.err, HasSubstr("give --tls-cert and --tls-key"));

  rpc::ClientSecurity intruder = no_cert;
  intruder.tls_cert_file = certs().other_client_cert;
  intruder.tls_key_file = certs().other_client_key;
  EXPECT_EQ(ListModelsCode(*SecureStub(intruder)), grpc::StatusCode::UNAVAILABLE);

  rpc::ClientSecurity client = no_cert;
  client.tls_cert_file = certs().client_cert;
  client.tls_key_file = certs().client_key;
  EXPECT_TRUE(Serves(*SecureStub(client)));
  const CliResult ok = RunCli({"--server", server_->address(), "--tls-ca", certs().ca,
                               "--tls-cert", certs().client_cert, "--tls-key",
                               certs().client_key, "models"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("tiny-gpt2"));
}

TEST_F(RpcSecurityTest, TokenMissingOrWrongIsUnauthenticatedAndHealthStaysOpen) {
  StartSecureServer({"--auth-token-file", TokenFile()});
  rpc::ClientSecurity none;
  const grpc::Status missing = AnalyzeStatus(*SecureStub(none));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("authorization: Bearer <token>"));
  EXPECT_THAT(missing.error_message(), HasSubstr("--auth-token-file"));

  rpc::ClientSecurity wrong;
  wrong.token = std::string(kToken).substr(0, 31) + "X";  // differs in the last byte only
  const grpc::Status bad = AnalyzeStatus(*SecureStub(wrong));
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(bad.error_message(), HasSubstr("the bearer token is wrong"));
  wrong.token = std::string(kToken) + "extra";  // a longer token with the right prefix
  EXPECT_EQ(AnalyzeStatus(*SecureStub(wrong)).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListModelsCode(*SecureStub(wrong)), grpc::StatusCode::UNAUTHENTICATED);

  // Probes need no token.
  const CliResult health = RunCli({"--server", server_->address(), "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
  const CliResult cli = RunCli({"--server", server_->address(), "models"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_THAT(cli.err, HasSubstr("UNAUTHENTICATED"));

  rpc::ClientSecurity right;
  right.token = kToken;
  EXPECT_TRUE(Serves(*SecureStub(right)));
  EXPECT_EQ(MetricValue(ScrapeMetrics(server_->metrics_address()),
                        "attnscope_requests_total{code=\"UNAUTHENTICATED\",model=\"\",origin="
                        "\"user\",rpc=\"Analyze\"}"),
            3);  // missing, wrong, longer
}

// The unary calls behind remote tokenize, heads and ablate pass the same gate.
TEST_F(RpcSecurityTest, TokenizeScanHeadsAndAblateNeedTheToken) {
  StartSecureServer({"--auth-token-file", TokenFile()});
  const auto codes = [](v1::Analyzer::Stub& stub) {
    v1::TokenizeRequest tokenize;
    tokenize.set_text("Hello");
    v1::TokenizeResponse tokens;
    grpc::ClientContext c1;
    const grpc::StatusCode tokenized = stub.Tokenize(&c1, tokenize, &tokens).error_code();
    v1::HeadScanRequest scan;
    scan.mutable_probe()->mutable_random()->set_n(4);
    v1::HeadScanResponse scanned;
    grpc::ClientContext c2;
    const grpc::StatusCode scanned_code = stub.ScanHeads(&c2, scan, &scanned).error_code();
    v1::AblateRequest ablate;
    ablate.mutable_probe()->mutable_random()->set_n(4);
    v1::AblateResponse ablated;
    grpc::ClientContext c3;
    const grpc::StatusCode ablated_code = stub.Ablate(&c3, ablate, &ablated).error_code();
    return std::vector<grpc::StatusCode>{tokenized, scanned_code, ablated_code};
  };
  rpc::ClientSecurity none;
  for (grpc::StatusCode code : codes(*SecureStub(none))) {
    EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED);
  }
  rpc::ClientSecurity right;
  right.token = kToken;
  const std::vector<grpc::StatusCode> served = codes(*SecureStub(right));
  EXPECT_EQ(served[0], grpc::StatusCode::OK);
  EXPECT_NE(served[1], grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(served[2], grpc::StatusCode::UNAUTHENTICATED);
}

// EvaluateEviction is gated like Analyze and Generate: the token first,
// then the client's open streams.
TEST_F(RpcSecurityTest, EvaluateEvictionNeedsTheToken) {
  StartSecureServer({"--auth-token-file", TokenFile()});
  const auto code = [](v1::Analyzer::Stub& stub) {
    v1::EvaluateEvictionRequest request;
    request.set_text("Hello world, hello world");
    request.add_policies("window:4");
    grpc::ClientContext context;
    auto reader = stub.EvaluateEviction(&context, request);
    v1::EvaluateEvictionEvent event;
    while (reader->Read(&event)) {
    }
    return reader->Finish().error_code();
  };
  rpc::ClientSecurity none;
  EXPECT_EQ(code(*SecureStub(none)), grpc::StatusCode::UNAUTHENTICATED);
  rpc::ClientSecurity right;
  right.token = kToken;
  EXPECT_EQ(code(*SecureStub(right)), grpc::StatusCode::OK);
}

TEST_F(RpcSecurityTest, UnauthenticatedRequestsNeverReachTheFeed) {
  StartSecureServer({"--auth-token-file", TokenFile()});
  rpc::ClientSecurity right;
  right.token = kToken;
  auto stub = SecureStub(right);
  grpc::ClientContext feed_context;
  auto feed = stub->Subscribe(&feed_context, v1::SubscribeRequest());
  feed->WaitForInitialMetadata();
  // A subscriber without the token is refused.
  rpc::ClientSecurity none;
  grpc::ClientContext anonymous_feed;
  auto refused = SecureStub(none)->Subscribe(&anonymous_feed, v1::SubscribeRequest());
  v1::FeedEvent event;
  EXPECT_FALSE(refused->Read(&event));
  EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  EXPECT_EQ(AnalyzeStatus(*SecureStub(none), "intruder text").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(AnalyzeStatus(*stub, "member text").ok());
  // The first event is the authenticated request's: the refused one was
  // never announced.
  ASSERT_TRUE(feed->Read(&event));
  ASSERT_TRUE(event.has_started());
  EXPECT_EQ(event.started().prompt_preview(), "member text");
  feed_context.TryCancel();
}

TEST_F(RpcSecurityTest, CliSendsTheTokenFromAFileOrTheEnvironment) {
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key,
                     "--auth-token-file", TokenFile()});
  EXPECT_THAT(server_->Stderr(), HasSubstr("gRPC over TLS, bearer token required"));
  const std::vector<std::string> base = {"--server", server_->address(), "--tls-ca", certs().ca};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  };
  const CliResult from_file = with({"--auth-token-file", TokenFile(), "analyze", "--text", "Hi"});
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(setenv("ATTNSCOPE_TOKEN", kToken, 1), 0);
  const CliResult from_env = with({"generate", "--text", "Hi", "--max-new-tokens", "2"});
  unsetenv("ATTNSCOPE_TOKEN");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  const CliResult without = with({"analyze", "--text", "Hi"});
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_THAT(without.err, HasSubstr("UNAUTHENTICATED: this server requires a bearer token"));
  const CliResult wrong_file =
      with({"--auth-token-file", WriteSecretFile("wrong-token", "not-the-token-at-all\n"),
            "models"});
  EXPECT_EQ(wrong_file.exit_code, 1);
  EXPECT_THAT(wrong_file.err, HasSubstr("UNAUTHENTICATED: the bearer token is wrong"));
}

TEST_F(RpcSecurityTest, CliConnectionFlagErrorsAreUsageErrors) {
  const CliResult no_server = RunCli({"--tls-ca", certs().ca, "models"});
  EXPECT_EQ(no_server.exit_code, 2);
  EXPECT_THAT(no_server.err, HasSubstr("--tls-ca is for connecting to a server"));
  const CliResult missing =
      RunCli({"--server", "127.0.0.1:1", "--tls-ca", certs().dir + "/nope.pem", "models"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--tls-ca " + certs().dir + "/nope.pem: cannot be read"));
  const CliResult half = RunCli({"--server", "127.0.0.1:1", "--tls-ca", certs().ca, "--tls-cert",
                                 certs().client_cert, "models"});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
  const CliResult empty_token = RunCli({"--server", "127.0.0.1:1", "--auth-token-file",
                                        WriteSecretFile("empty-token", "\n  \n"), "models"});
  EXPECT_EQ(empty_token.exit_code, 2);
  EXPECT_THAT(empty_token.err, HasSubstr("holds no token on its first line"));
}

TEST_F(RpcSecurityTest, ServerSecurityFlagErrorsExitWithUsage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert", certs().server_cert}, "--tls-cert and --tls-key go together"},
      {{"--tls-key", certs().server_key}, "--tls-cert and --tls-key go together"},
      {{"--tls-client-ca", certs().ca}, "--tls-client-ca needs TLS"},
      {{"--tls-cert", certs().dir + "/missing.pem", "--tls-key", certs().server_key},
       "--tls-cert " + certs().dir + "/missing.pem: cannot be read"},
      {{"--tls-cert", TokenFile(), "--tls-key", certs().server_key}, "is not PEM"},
      {{"--auth-token-file", WriteSecretFile("short-token", "abc123\n")},
       "the token has 6 characters, fewer than 16"},
      {{"--auth-token-file", WriteSecretFile("spaced-token", "has a space inside it!\n")},
       "outside printable ASCII"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--metrics-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliResult result = RunBinary("attnscope-server", args, 60);
    EXPECT_EQ(result.exit_code, 2) << c.args[0] << ": " << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.message)) << c.args[0];
  }
}

TEST_F(RpcSecurityTest, MetricsStayOnLoopbackByDefaultAndCarryNoPrompts) {
  const CliResult help = RunBinary("attnscope-server", {"--help"}, 60);
  EXPECT_THAT(help.out, HasSubstr("--metrics-listen ADDR     /metrics address (default 127.0.0.1:9464"));
  StartSecureServer({"--tls-cert", certs().server_cert, "--tls-key", certs().server_key,
                     "--auth-token-file", TokenFile(), "--metrics-listen", "0.0.0.0:0"});
  EXPECT_THAT(server_->Stderr(), HasSubstr("warning: /metrics on 0.0.0.0:0 has neither TLS nor a "
                                           "token"));
  rpc::ClientSecurity client;
  client.tls_ca_file = certs().ca;
  client.token = kToken;
  ASSERT_TRUE(AnalyzeStatus(*SecureStub(client), "quokka zebra confidential").ok());
  const std::string scrape = ScrapeMetrics(server_->metrics_address());
  ASSERT_THAT(scrape, HasSubstr("attnscope_requests_total"));
  EXPECT_THAT(scrape, Not(HasSubstr("quokka")));
  EXPECT_THAT(scrape, Not(HasSubstr("confidential")));
}

TEST_F(RpcSecurityTest, TokenWithoutTlsOffLoopbackIsWarnedAbout) {
  StartSecureServer({"--auth-token-file", TokenFile(), "--listen", "0.0.0.0:0"});
  EXPECT_THAT(server_->Stderr(), HasSubstr("--auth-token-file without --tls-cert on 0.0.0.0:0"));
}

}  // namespace
}  // namespace attnscope::testing
