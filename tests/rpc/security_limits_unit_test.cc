// The pieces of TLS/token handling and of the limits that need no server:
// token comparison and files, peers as clients, streams per client, and the
// attention-bytes and size checks.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/rpc/client_streams.h"
#include "service/rpc/request_validation.h"
#include "service/rpc/transport_security.h"
#include "tests/common/temp_path.h"

namespace attnscope::rpc {
namespace {

using ::testing::HasSubstr;

TEST(ConstantTimeEqualsTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(ConstantTimeEquals("abcdef", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcdeX", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("Xbcdef", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcde", "abcdef"));    // a prefix
  EXPECT_FALSE(ConstantTimeEquals("abcdefg", "abcdef"));  // longer
  EXPECT_FALSE(ConstantTimeEquals("", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("abc\0ef", 6), "abcdef"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

std::string WriteTemp(const std::string& content) {
  const std::string path = test::UniqueTempPath("token");
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(ReadTokenFileTest, FirstLineTrimmedAndChecked) {
  const std::string good = WriteTemp("  0123456789abcdef0123 \r\nsecond line\n");
  auto token = ReadTokenFile(good, "--auth-token-file", kMinTokenBytes);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "0123456789abcdef0123");
  EXPECT_THAT(ReadTokenFile(WriteTemp("short\n"), "--auth-token-file", kMinTokenBytes)
                  .status()
                  .message(),
              HasSubstr("fewer than 16"));
  EXPECT_THAT(ReadTokenFile(WriteTemp("\n"), "--auth-token-file").status().message(),
              HasSubstr("holds no token"));
  EXPECT_THAT(ReadTokenFile(WriteTemp(""), "--auth-token-file").status().message(),
              HasSubstr("is empty"));
  EXPECT_THAT(ReadTokenFile("/nonexistent/token", "--auth-token-file").status().message(),
              HasSubstr("--auth-token-file /nonexistent/token: cannot be read"));
  EXPECT_THAT(ReadTokenFile(WriteTemp("tok\xc3\xa9n-0123456789abcdef"), "--auth-token-file")
                  .status()
                  .message(),
              HasSubstr("outside printable ASCII"));
}

TEST(ClientOfPeerTest, DropsThePortOnly) {
  EXPECT_EQ(ClientOfPeer("ipv4:10.0.0.7:41234"), "ipv4:10.0.0.7");
  EXPECT_EQ(ClientOfPeer("ipv6:[::1]:5000"), "ipv6:[::1]");
  EXPECT_EQ(ClientOfPeer("ipv6:[fe80::1%eth0]:5000"), "ipv6:[fe80::1%eth0]");
  EXPECT_EQ(ClientOfPeer("unix:/tmp/socket"), "unix:/tmp/socket");
  EXPECT_EQ(ClientOfPeer("ipv4:10.0.0.7"), "ipv4:10.0.0.7");
}

TEST(ClientStreamsTest, CountsPerHostAndGivesPlacesBack) {
  ClientStreams streams(2);
  auto a = streams.Open("ipv4:10.0.0.7:1000");
  auto b = streams.Open("ipv4:10.0.0.7:1001");  // another connection, same host
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = streams.Open("ipv4:10.0.0.7:1002");
  ASSERT_TRUE(absl::IsResourceExhausted(c.status()));
  EXPECT_THAT(c.status().message(), HasSubstr("client ipv4:10.0.0.7 already has 2 streams open"));
  EXPECT_THAT(c.status().message(), HasSubstr("--max-streams-per-client 2"));
  EXPECT_TRUE(streams.Open("ipv4:10.0.0.8:1000").ok());  // another host (released at once)
  EXPECT_EQ(streams.OpenStreams("ipv4:10.0.0.8:1"), 0);
  { ClientStreams::Lease gone = *std::move(a); }
  EXPECT_EQ(streams.OpenStreams("ipv4:10.0.0.7:9"), 1);
  EXPECT_TRUE(streams.Open("ipv4:10.0.0.7:1003").ok());
  ClientStreams unlimited(0);
  std::vector<ClientStreams::Lease> many;
  for (int i = 0; i < 100; ++i) many.push_back(*unlimited.Open("ipv4:1.2.3.4:5"));
  EXPECT_EQ(unlimited.OpenStreams("ipv4:1.2.3.4:6"), 100);
}

TEST(LimitChecksTest, AttentionBytesNewTokensAndMessageSize) {
  StreamOptions stream;
  stream.tensors.attention.layers = {0, 2};
  stream.tensors.attention.heads = {0, 1, 2, 3};
  // 2 layers x 4 heads x 10^2 x 4 bytes = 3200.
  EXPECT_TRUE(CheckAttentionBytes(stream, 10, 3200).ok());
  const absl::Status over = CheckAttentionBytes(stream, 10, 3199);
  EXPECT_TRUE(absl::IsInvalidArgument(over));
  EXPECT_THAT(over.message(), HasSubstr("2 layers x 4 heads x 10^2 x 4 bytes = 3200 bytes"));
  EXPECT_THAT(over.message(), HasSubstr("limit of 3199"));
  stream.tensors.attention_float16 = true;
  EXPECT_TRUE(CheckAttentionBytes(stream, 10, 1600).ok());
  EXPECT_TRUE(CheckAttentionBytes(StreamOptions(), 100000, 1).ok());  // no attention asked
  EXPECT_TRUE(CheckAttentionBytes(stream, 1 << 30, 0).ok());          // 0: no limit
  // Far beyond int64: still refused, not wrapped around.
  stream.tensors.attention = engine::HeadSelection::All(1000, 1000);
  EXPECT_FALSE(CheckAttentionBytes(stream, int64_t{1} << 40, int64_t{1} << 40).ok());

  EXPECT_TRUE(CheckNewTokenLimit(1024, 1024).ok());
  EXPECT_THAT(CheckNewTokenLimit(1025, 1024).message(), HasSubstr("--max-new-tokens"));
  EXPECT_TRUE(CheckNewTokenLimit(1 << 20, 0).ok());
  EXPECT_TRUE(CheckMessageSize(4096, 4096).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(CheckMessageSize(4097, 4096)));
}

}  // namespace
}  // namespace attnscope::rpc
