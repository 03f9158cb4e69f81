#include "service/tokenizer/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/core/status_macros.h"
#include "service/core/utf8.h"
#include "service/tokenizer/byte_level.h"
#include "service/tokenizer/hf_added_tokens.h"
#include "service/tokenizer/hf_bpe_model.h"
#include "service/tokenizer/hf_decoder.h"
#include "service/tokenizer/hf_json.h"
#include "service/tokenizer/hf_normalizer.h"
#include "service/tokenizer/hf_pretokenizer.h"

namespace attnscope::tokenizer {
namespace {

// What the post-processor puts around a single sequence.
struct Template {
  std::vector<int64_t> prefix;
  std::vector<int64_t> suffix;
};

absl::StatusOr<std::vector<int64_t>> SpecialIds(const nlohmann::json& special,
                                                const std::string& name, const std::string& path,
                                                const std::string& file) {
  auto it = special.find(name);
  if (it == special.end() || !it->contains("ids") || !(*it)["ids"].is_array()) {
    return Malformed(file, path, absl::StrCat("special token \"", name,
                                              "\" is not in special_tokens with its ids"));
  }
  std::vector<int64_t> ids;
  for (const auto& id : (*it)["ids"]) {
    if (!id.is_number_integer()) return Malformed(file, path, "special token ids must be integers");
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

absl::Status ParseTemplateProcessing(const nlohmann::json& json, const std::string& path,
                                     const std::string& file, Template& out) {
  ATTNSCOPE_ASSIGN_OR_RETURN(const nlohmann::json* single, ArrayField(json, "single", path, file));
  const nlohmann::json special = json.value("special_tokens", nlohmann::json::object());
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const nlohmann::json& item = (*single)[i];
    const std::string item_path = absl::StrCat(path, ".single[", i, "]");
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") ||
        !item["SpecialToken"]["id"].is_string()) {
      return Malformed(file, item_path, "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
    }
    ATTNSCOPE_ASSIGN_OR_RETURN(
        std::vector<int64_t> ids,
        SpecialIds(special, item["SpecialToken"]["id"].get<std::string>(), item_path, file));
    auto& target = seen_sequence ? out.suffix : out.prefix;
    target.insert(target.end(), ids.begin(), ids.end());
  }
  return absl::OkStatus();
}

// Bert/RobertaProcessing: {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}.
absl::Status ParseClsSep(const nlohmann::json& json, const std::string& path,
                         const std::string& file, Template& out) {
  for (const char* key : {"cls", "sep"}) {
    auto it = json.find(key);
    if (it == json.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return Malformed(file, absl::StrCat(path, ".", key), "expected [token, id]");
    }
    (std::string(key) == "cls" ? out.prefix : out.suffix).push_back((*it)[1].get<int64_t>());
  }
  return absl::OkStatus();
}

absl::Status ParsePostProcessor(const nlohmann::json& json, const std::string& path,
                                const std::string& file, Template& out) {
  if (json.is_null()) return absl::OkStatus();
  ATTNSCOPE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, path, file));
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only
  if (type == "TemplateProcessing") return ParseTemplateProcessing(json, path, file, out);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return ParseClsSep(json, path, file, out);
  }
  if (type == "Sequence") {
    ATTNSCOPE_ASSIGN_OR_RETURN(const nlohmann::json* list, ArrayField(json, "processors", path, file));
    for (size_t i = 0; i < list->size(); ++i) {
      ATTNSCOPE_RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], absl::StrCat(path, ".processors[", i, "]"), file, out));
    }
    return absl::OkStatus();
  }
  return UnsupportedType(file, path, type);
}

}  // namespace

struct HfTokenizer::Impl {
  std::string file;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  Template post;
  AddedTokenMatcher raw_added;         // normalized: false
  AddedTokenMatcher normalized_added;  // normalized: true
  std::unordered_map<int64_t, std::string> added_content;
  std::unordered_map<std::string, int64_t> added_ids;
  std::unordered_set<int64_t> special;
  std::vector<std::string> token_strings;  // id -> string
  std::vector<std::string> token_bytes;    // id -> raw bytes

  absl::Status BuildTables();
  absl::Status EncodeText(const Piece& piece, Encoding& out) const;
  void EmitModel(std::vector<Piece> pieces, Encoding& out) const;
};

absl::Status HfTokenizer::Impl::BuildTables() {
  token_strings = model->id_to_token();
  for (const auto& [id, content] : added_content) {
    if (static_cast<size_t>(id) >= token_strings.size()) token_strings.resize(id + 1);
    token_strings[id] = content;
  }
  const bool byte_level = decoder != nullptr && decoder->IsByteLevel();
  const std::string marker = decoder != nullptr ? decoder->SpaceMarker() : "";
  token_bytes.resize(token_strings.size());
  for (size_t id = 0; id < token_strings.size(); ++id) {
    const std::string& s = token_strings[id];
    std::string& bytes = token_bytes[id];
    if (added_content.count(static_cast<int64_t>(id)) != 0) {
      bytes = s;
    } else if (byte_level) {
      if (!SymbolsToBytes(s, &bytes)) bytes = s;
    } else if (const int b = ByteFallbackValue(s); b >= 0) {
      bytes = std::string(1, static_cast<char>(b));
    } else {
      for (size_t k = 0; k < s.size();) {
        if (!marker.empty() && s.compare(k, marker.size(), marker) == 0) {
          bytes += ' ';
          k += marker.size();
        } else {
          bytes += s[k++];
        }
      }
    }
  }
  return absl::OkStatus();
}

void HfTokenizer::Impl::EmitModel(std::vector<Piece> pieces, Encoding& out) const {
  for (const Piece& piece : pieces) {
    if (piece.text.empty()) continue;
    for (const BpeModel::Token& t : model->Encode(piece.text)) {
      out.ids.push_back(t.id);
      out.offsets.push_back(piece.Span(t.begin, t.end));
    }
  }
}

absl::Status HfTokenizer::Impl::EncodeText(const Piece& raw, Encoding& out) const {
  Piece piece = raw;
  if (normalizer != nullptr) ATTNSCOPE_RETURN_IF_ERROR(normalizer->Apply(piece));
  std::vector<Piece> runs;
  size_t pos = 0;
  auto flush_runs = [&]() -> absl::Status {
    if (runs.empty()) return absl::OkStatus();
    if (pre_tokenizer != nullptr) ATTNSCOPE_RETURN_IF_ERROR(pre_tokenizer->Split(runs));
    EmitModel(std::move(runs), out);
    runs.clear();
    return absl::OkStatus();
  };
  for (const auto& m : normalized_added.FindAll(piece.text)) {
    if (m.begin > pos) runs.push_back(piece.Sub(pos, m.begin));
    ATTNSCOPE_RETURN_IF_ERROR(flush_runs());
    out.ids.push_back(m.id);
    out.offsets.push_back(piece.Span(m.begin, m.end));
    pos = m.end;
  }
  if (pos < piece.text.size()) runs.push_back(piece.Sub(pos, piece.text.size()));
  return flush_runs();
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read"));
  return Parse(text.str(), path);
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Parse(std::string_view json_text,
                                                                const std::string& file) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": invalid JSON: ", e.what()));
  }
  if (!json.is_object()) return Malformed(file, "(top level)", "expected an object");
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  auto get = [&json](const char* key) { return json.value(key, nlohmann::json()); };
  if (!json.contains("model")) return Malformed(file, "model", "missing");
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->model, BpeModel::Parse(json["model"], file));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->normalizer, ParseNormalizer(get("normalizer"), "normalizer", file));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                             ParsePreTokenizer(get("pre_tokenizer"), "pre_tokenizer", file));
  ATTNSCOPE_ASSIGN_OR_RETURN(impl->decoder, ParseDecoder(get("decoder"), "decoder", file));
  ATTNSCOPE_RETURN_IF_ERROR(
      ParsePostProcessor(get("post_processor"), "post_processor", file, impl->post));
  ATTNSCOPE_ASSIGN_OR_RETURN(std::vector<AddedToken> added,
                             ParseAddedTokens(get("added_tokens"), file));
  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (AddedToken& t : added) {
    impl->added_content[t.id] = t.content;
    impl->added_ids[t.content] = t.id;
    if (t.special) impl->special.insert(t.id);
    (t.normalized ? normalized : raw).push_back(std::move(t));
  }
  impl->raw_added = AddedTokenMatcher(std::move(raw));
  impl->normalized_added = AddedTokenMatcher(std::move(normalized));
  ATTNSCOPE_RETURN_IF_ERROR(impl->BuildTables());
  // Both ends: an id the vocabulary lacks (or a gap between sparse added
  // tokens) would reach the model as a token nothing can decode.
  for (const std::vector<int64_t>* ids : {&impl->post.prefix, &impl->post.suffix}) {
    for (int64_t id : *ids) {
      if (id < 0 || id >= static_cast<int64_t>(impl->token_strings.size()) ||
          impl->token_strings[id].empty()) {
        return Malformed(file, "post_processor",
                         absl::StrCat("special token id ", id, " is not in the vocabulary"));
      }
    }
  }
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(impl)));
}

absl::StatusOr<Encoding> HfTokenizer::Encode(std::string_view text) const {
  ATTNSCOPE_RETURN_IF_ERROR(ValidateUtf8(text, "text"));
  Encoding out;
  size_t pos = 0;
  const std::string whole(text);
  for (const auto& m : impl_->raw_added.FindAll(text)) {
    if (m.begin > pos) {
      ATTNSCOPE_RETURN_IF_ERROR(impl_->EncodeText(
          Piece::Original(whole.substr(pos, m.begin - pos), static_cast<int64_t>(pos)), out));
    }
    out.ids.push_back(m.id);
    out.offsets.emplace_back(m.begin, m.end);
    pos = m.end;
  }
  if (pos < text.size()) {
    ATTNSCOPE_RETURN_IF_ERROR(
        impl_->EncodeText(Piece::Original(whole.substr(pos), static_cast<int64_t>(pos)), out));
  }
  return out;
}

Encoding HfTokenizer::AddSpecialTokens(Encoding encoding) const {
  const int64_t end = encoding.offsets.empty() ? 0 : encoding.offsets.back().second;
  Encoding out;
  for (int64_t id : impl_->post.prefix) {
    out.ids.push_back(id);
    out.offsets.emplace_back(0, 0);
  }
  out.ids.insert(out.ids.end(), encoding.ids.begin(), encoding.ids.end());
  out.offsets.insert(out.offsets.end(), encoding.offsets.begin(), encoding.offsets.end());
  for (int64_t id : impl_->post.suffix) {
    out.ids.push_back(id);
    out.offsets.emplace_back(end, end);
  }
  return out;
}

absl::StatusOr<std::string> HfTokenizer::Decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTNSCOPE_ASSIGN_OR_RETURN(std::string t, TokenString(ids[i]));
    tokens.push_back(std::move(t));
  }
  if (impl_->decoder == nullptr) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  ATTNSCOPE_RETURN_IF_ERROR(impl_->decoder->DecodeChain(tokens));
  std::string text;
  for (const std::string& t : tokens) text += t;
  return SanitizeUtf8(text);
}

absl::StatusOr<std::string> HfTokenizer::TokenBytes(int64_t id) const {
  if (id < 0 || id >= vocab_size() || impl_->token_strings[id].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary of ",
                                                   impl_->file, " [0, ", vocab_size(), ")"));
  }
  return impl_->token_bytes[id];
}

absl::StatusOr<std::string> HfTokenizer::TokenString(int64_t id) const {
  if (id < 0 || id >= vocab_size() || impl_->token_strings[id].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary of ",
                                                   impl_->file, " [0, ", vocab_size(), ")"));
  }
  return impl_->token_strings[id];
}

bool HfTokenizer::IsSpecial(int64_t id) const { return impl_->special.count(id) != 0; }

int64_t HfTokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->token_strings.size());
}

int64_t HfTokenizer::TokenToId(const std::string& token) const {
  if (auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  return impl_->model->Find(token);
}

}  // namespace attnscope::tokenizer
