// Streams per client: how many Analyze, Generate and Subscribe calls one
// client host has open at once, so that a single client cannot take every
// compute slot, queue place and subscriber slot. A client is the peer's
// address without its port (every connection from one host counts
// together; behind a proxy, the proxy is the client).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace attnscope::rpc {

class ClientStreams {
 public:
  // At most `max_per_client` open streams per client; 0: no limit.
  explicit ClientStreams(int max_per_client) : max_per_client_(max_per_client) {}

  // One open stream; gives its place back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : owner_(other.owner_), client_(std::move(other.client_)) {
      other.owner_ = nullptr;
    }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }

   private:
    friend class ClientStreams;
    Lease(ClientStreams* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    void Release();
    ClientStreams* owner_ = nullptr;
    std::string client_;
  };

  // A place for a stream of the client at gRPC peer `peer` (e.g.
  // "ipv4:10.0.0.7:41234"). ResourceExhausted naming the client, the limit
  // and --max-streams-per-client when it already has that many open.
  absl::StatusOr<Lease> Open(const std::string& peer);

  // Streams `peer`'s client has open now.
  int OpenStreams(const std::string& peer) const;

 private:
  void Close(const std::string& client);

  const int max_per_client_;
  mutable std::mutex mu_;
  std::map<std::string, int> open_;  // client -> streams open
};

// The client part of a gRPC peer string: "ipv4:10.0.0.7:41234" ->
// "ipv4:10.0.0.7", "ipv6:[::1]:5000" -> "ipv6:[::1]"; other forms (unix:...)
// unchanged.
std::string ClientOfPeer(const std::string& peer);

}  // namespace attnscope::rpc
