#include "service/rpc/client_streams.h"

#include "absl/strings/str_cat.h"

namespace attnscope::rpc {

ClientStreams::Lease& ClientStreams::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    client_ = std::move(other.client_);
    other.owner_ = nullptr;
  }
  return *this;
}

void ClientStreams::Lease::Release() {
  if (owner_ != nullptr) owner_->Close(client_);
  owner_ = nullptr;
}

absl::StatusOr<ClientStreams::Lease> ClientStreams::Open(const std::string& peer) {
  std::string client = ClientOfPeer(peer);
  std::lock_guard<std::mutex> lock(mu_);
  int& open = open_[client];
  if (max_per_client_ > 0 && open >= max_per_client_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client ", client, " already has ", open, " streams open, the server's limit per client (",
        "--max-streams-per-client ", max_per_client_,
        "); wait for one to finish or cancel one, then retry"));
  }
  ++open;
  return Lease(this, std::move(client));
}

int ClientStreams::OpenStreams(const std::string& peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = open_.find(ClientOfPeer(peer));
  return it == open_.end() ? 0 : it->second;
}

void ClientStreams::Close(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  // Forget idle clients, so the map holds only hosts with open streams.
  if (--it->second <= 0) open_.erase(it);
}

std::string ClientOfPeer(const std::string& peer) {
  if (peer.rfind("ipv4:", 0) != 0 && peer.rfind("ipv6:", 0) != 0) return peer;
  const size_t colon = peer.rfind(':');
  // "ipv4:" itself has a colon at 4: a peer without a port stays whole.
  if (colon == std::string::npos || colon <= 4) return peer;
  if (peer.rfind("ipv6:", 0) == 0 && peer.find(']') == std::string::npos) return peer;
  return peer.substr(0, colon);
}

}  // namespace attnscope::rpc
