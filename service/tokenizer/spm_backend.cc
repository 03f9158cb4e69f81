// Built into libattnscope_spm.so only (see spm_backend.h).
#include "service/tokenizer/spm_backend.h"

#include <sentencepiece_processor.h>

namespace attnscope::tokenizer {
namespace {

class SentencePieceBackend : public SpmBackend {
 public:
  bool Load(const std::string& path, std::string* error) {
    const auto status = processor_.Load(path);
    if (!status.ok()) *error = status.ToString();
    return status.ok();
  }

  bool Encode(const std::string& text, std::vector<Piece>* pieces,
              std::string* error) const override {
    sentencepiece::ImmutableSentencePieceText spt;
    const auto status = processor_.Encode(text, spt.mutable_proto());
    if (!status.ok()) {
      *error = status.ToString();
      return false;
    }
    for (const auto& p : spt.pieces()) {
      pieces->push_back({static_cast<int>(p.id()), p.begin(), p.end()});
    }
    return true;
  }
  std::string Decode(const std::vector<int>& ids) const override {
    return processor_.DecodeIds(ids);
  }
  std::string IdToPiece(int id) const override { return processor_.IdToPiece(id); }
  int size() const override { return processor_.GetPieceSize(); }
  bool IsControl(int id) const override { return processor_.IsControl(id); }
  bool IsUnknown(int id) const override { return processor_.IsUnknown(id); }
  bool IsByte(int id) const override { return processor_.IsByte(id); }
  int bos_id() const override { return processor_.bos_id(); }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace
}  // namespace attnscope::tokenizer

extern "C" attnscope::tokenizer::SpmBackend* attnscope_spm_create(const char* path,
                                                                  std::string* error) {
  auto backend = std::make_unique<attnscope::tokenizer::SentencePieceBackend>();
  if (!backend->Load(path, error)) return nullptr;
  return backend.release();
}
