#include "service/tokenizer/hf_bpe_model.h"

#include <functional>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/tokenizer/hf_json.h"

namespace attnscope::tokenizer {
namespace {

constexpr size_t kMaxCacheEntries = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 64;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t id;
  int32_t begin;
  int32_t end;
  int32_t prev;
  int32_t next;
  bool alive;
};

}  // namespace

struct BpeModel::Impl {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> id_to_token;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // -> (rank, new id)
  std::string prefix;
  std::string suffix;
  int32_t unk_id = -1;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::array<int32_t, 256> byte_ids{};

  mutable std::shared_mutex cache_mutex;
  mutable absl::flat_hash_map<std::string, std::vector<Token>> cache;

  absl::Status ParseVocab(const nlohmann::json& json, const std::string& file);
  absl::Status ParseMerges(const nlohmann::json& json, const std::string& file);
  std::vector<Symbol> Initial(std::string_view word) const;
  std::vector<Token> Merge(std::vector<Symbol> word) const;
};

absl::Status BpeModel::Impl::ParseVocab(const nlohmann::json& json, const std::string& file) {
  auto it = json.find("vocab");
  if (it == json.end() || !it->is_object()) {
    return Malformed(file, "model.vocab", "expected an object {token: id}");
  }
  vocab.reserve(it->size());
  for (const auto& [token, value] : it->items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > kMaxTokenId) {
      return Malformed(file, absl::StrCat("model.vocab[\"", token, "\"]"),
                       absl::StrCat("expected an integer id in [0, ", kMaxTokenId, "]"));
    }
    const auto id = value.get<int32_t>();
    vocab.emplace(token, id);
    if (static_cast<size_t>(id) >= id_to_token.size()) id_to_token.resize(id + 1);
    id_to_token[id] = token;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::Impl::ParseMerges(const nlohmann::json& json, const std::string& file) {
  auto it = json.find("merges");
  if (it == json.end() || !it->is_array()) return Malformed(file, "model.merges", "expected an array");
  merges.reserve(it->size());
  int32_t rank = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& m = (*it)[i];
    const std::string path = absl::StrCat("model.merges[", i, "]");
    std::string left;
    std::string right;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      if (i == 0 && line.rfind("#version", 0) == 0) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return Malformed(file, path, absl::StrCat("\"", line, "\" is not two tokens separated by one space"));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return Malformed(file, path, "expected \"a b\" or [\"a\", \"b\"]");
    }
    std::string merged = left;
    merged += right.compare(0, prefix.size(), prefix) == 0 ? right.substr(prefix.size()) : right;
    const std::string* names[3] = {&left, &right, &merged};
    int32_t ids[3];
    for (int k = 0; k < 3; ++k) {
      auto v = vocab.find(*names[k]);
      if (v == vocab.end()) {
        return Malformed(file, path, absl::StrCat("token \"", *names[k], "\" is not in model.vocab"));
      }
      ids[k] = v->second;
    }
    merges.insert_or_assign(PairKey(ids[0], ids[1]), std::make_pair(rank++, ids[2]));
  }
  return absl::OkStatus();
}

std::vector<Symbol> BpeModel::Impl::Initial(std::string_view word) const {
  std::vector<Symbol> symbols;
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t n =
        std::min(Utf8SequenceLength(static_cast<unsigned char>(word[i])), word.size() - i);
    const auto begin = static_cast<int32_t>(i);
    const auto end = static_cast<int32_t>(i + n);
    key.clear();
    if (i > 0) key += prefix;
    key.append(word.data() + i, n);
    if (i + n == word.size()) key += suffix;
    i += n;
    if (auto it = vocab.find(key); it != vocab.end()) {
      symbols.push_back({it->second, begin, end, 0, 0, true});
      continue;
    }
    bool all_bytes = byte_fallback;
    for (int32_t b = begin; all_bytes && b < end; ++b) {
      all_bytes = byte_ids[static_cast<unsigned char>(word[b])] >= 0;
    }
    if (all_bytes) {
      for (int32_t b = begin; b < end; ++b) {
        symbols.push_back({byte_ids[static_cast<unsigned char>(word[b])], b, b + 1, 0, 0, true});
      }
      continue;
    }
    if (unk_id < 0) continue;  // Hugging Face fails here; the character is dropped.
    if (fuse_unk && !symbols.empty() && symbols.back().id == unk_id) {
      symbols.back().end = end;
    } else {
      symbols.push_back({unk_id, begin, end, 0, 0, true});
    }
  }
  return symbols;
}

std::vector<BpeModel::Token> BpeModel::Impl::Merge(std::vector<Symbol> word) const {
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    word[i].prev = i - 1;
    word[i].next = i + 1 < n ? i + 1 : -1;
  }
  // (rank, position of the left symbol, merged id): lowest rank, then leftmost.
  using Candidate = std::tuple<int32_t, int32_t, int32_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || word[left].next < 0) return;
    auto it = merges.find(PairKey(word[left].id, word[word[left].next].id));
    if (it != merges.end()) heap.emplace(it->second.first, left, it->second.second);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, pos, merged] = heap.top();
    heap.pop();
    Symbol& left = word[pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = word[left.next];
    auto it = merges.find(PairKey(left.id, right.id));
    if (it == merges.end() || it->second.second != merged) continue;  // stale
    left.id = merged;
    left.end = right.end;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) word[left.next].prev = pos;
    push(left.prev);
    push(pos);
  }
  std::vector<Token> out;
  for (const Symbol& s : word) {
    if (s.alive) out.push_back({s.id, s.begin, s.end});
  }
  return out;
}

BpeModel::BpeModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeModel::~BpeModel() = default;

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Parse(const nlohmann::json& json,
                                                          const std::string& file) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, "model", file));
  if (type != "BPE") return UnsupportedType(file, "model", type);
  if (auto d = json.find("dropout"); d != json.end() && d->is_number() && d->get<double>() > 0) {
    return Malformed(file, "model.dropout", "BPE dropout is not supported (attnscope needs deterministic ids)");
  }
  auto impl = std::make_unique<Impl>();
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->prefix, StringField(json, "continuing_subword_prefix", "model", file));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->suffix, StringField(json, "end_of_word_suffix", "model", file));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->fuse_unk, BoolField(json, "fuse_unk", "model", file, false));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->byte_fallback, BoolField(json, "byte_fallback", "model", file, false));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->ignore_merges, BoolField(json, "ignore_merges", "model", file, false));
  ATTNSCOPE_RETURN_IF_ERROR(impl->ParseVocab(json, file));
  ATTNSCOPE_RETURN_IF_ERROR(impl->ParseMerges(json, file));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::string unk, StringField(json, "unk_token", "model", file));
  if (!unk.empty()) {
    auto it = impl->vocab.find(unk);
    if (it == impl->vocab.end()) {
      return Malformed(file, "model.unk_token", absl::StrCat("\"", unk, "\" is not in model.vocab"));
    }
    impl->unk_id = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = impl->vocab.find(absl::StrCat("<0x", absl::Hex(b, absl::kZeroPad2), ">"));
    if (it == impl->vocab.end()) {
      // Hugging Face spells the byte tokens in upper case (<0x0A>).
      std::string upper = absl::StrCat("<0x", absl::Hex(b, absl::kZeroPad2), ">");
      for (size_t k = 3; k < 5; ++k) upper[k] = static_cast<char>(std::toupper(upper[k]));
      it = impl->vocab.find(upper);
    }
    impl->byte_ids[b] = it == impl->vocab.end() ? -1 : it->second;
  }
  return std::unique_ptr<BpeModel>(new BpeModel(std::move(impl)));
}

std::vector<BpeModel::Token> BpeModel::Encode(std::string_view word) const {
  if (impl_->ignore_merges) {
    if (auto it = impl_->vocab.find(std::string(word)); it != impl_->vocab.end()) {
      return {{it->second, 0, static_cast<int32_t>(word.size())}};
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock<std::shared_mutex> lock(impl_->cache_mutex);
    auto it = impl_->cache.find(absl::string_view(word.data(), word.size()));
    if (it != impl_->cache.end()) return it->second;
  }
  std::vector<Token> tokens = impl_->Merge(impl_->Initial(word));
  if (cacheable) {
    std::unique_lock<std::shared_mutex> lock(impl_->cache_mutex);
    if (impl_->cache.size() >= kMaxCacheEntries) impl_->cache.clear();
    impl_->cache.emplace(std::string(word), tokens);
  }
  return tokens;
}

int32_t BpeModel::Find(const std::string& token) const {
  auto it = impl_->vocab.find(token);
  return it == impl_->vocab.end() ? -1 : it->second;
}

const std::vector<std::string>& BpeModel::id_to_token() const { return impl_->id_to_token; }

}  // namespace attnscope::tokenizer
