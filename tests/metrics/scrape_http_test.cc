// scrape_http: listen-address parsing and the answer to one request head.
#include "service/metrics/scrape_http.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace attnscope::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseListenAddressTest, SplitsHostAndPort) {
  absl::StatusOr<ListenAddress> v4 = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  absl::StatusOr<ListenAddress> v6 = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  absl::StatusOr<ListenAddress> any = ParseListenAddress(":65535");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->host, "");
  EXPECT_EQ(any->port, 65535);
}

TEST(ParseListenAddressTest, RejectsBadPortsNamingTheValue) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:94x4", "127.0.0.1:+80", "host:9999999999"}) {
    absl::StatusOr<ListenAddress> parsed = ParseListenAddress(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(bad));
  }
}

TEST(HasCompleteHeadTest, NeedsTheEmptyLine) {
  EXPECT_FALSE(HasCompleteHead("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(HasCompleteHead("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(HasCompleteHead("GET /metrics HTTP/1.0\n\n"));
}

class BuildScrapeResponseTest : public ::testing::Test {
 protected:
  std::string Answer(const std::string& head) {
    return BuildScrapeResponse(head, [this] {
      ++serializations_;
      return std::string("attnscope_subscribers 3\n");
    });
  }
  int serializations_ = 0;
};

TEST_F(BuildScrapeResponseTest, GetMetricsReturnsTheExposition) {
  const std::string answer = Answer("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(answer, HasSubstr("Content-Length: 24\r\n"));
  EXPECT_THAT(answer, HasSubstr("Connection: close\r\n"));
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "attnscope_subscribers 3\n");
  EXPECT_EQ(serializations_, 1);
}

TEST_F(BuildScrapeResponseTest, HeadHasLengthButNoBody) {
  const std::string answer = Answer("HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("Content-Length: 24\r\n"));
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), "");
}

TEST_F(BuildScrapeResponseTest, OtherPathsMethodsAndGarbageAreRefused) {
  EXPECT_THAT(Answer("GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(Answer("GET /metricsx HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404 "));
  const std::string post = Answer("POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(post, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_THAT(Answer("GET /metrics\r\n\r\n"), StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(Answer("GET /metrics SPDY/3\r\n\r\n"), StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(Answer(std::string("\0\xff\r\n\r\n", 6)), StartsWith("HTTP/1.1 400 "));
  EXPECT_EQ(serializations_, 0);
}

TEST(HeadTooLargeResponseTest, Is431) {
  EXPECT_THAT(HeadTooLargeResponse(), StartsWith("HTTP/1.1 431 "));
}

}  // namespace
}  // namespace attnscope::metrics
