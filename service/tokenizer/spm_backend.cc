#include "service/tokenizer/spm_backend.h"

#include <sentencepiece_processor.h>

namespace attnscope::tokenizer {

struct SpmBackend::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SpmBackend::SpmBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpmBackend::~SpmBackend() = default;

std::unique_ptr<SpmBackend> SpmBackend::Load(const std::string& path, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const auto status = impl->processor.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<SpmBackend>(new SpmBackend(std::move(impl)));
}

bool SpmBackend::Encode(const std::string& text, std::vector<Piece>* pieces,
                        std::string* error) const {
  sentencepiece::ImmutableSentencePieceText spt;
  const auto status = impl_->processor.Encode(text, spt.mutable_proto());
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  for (const auto& p : spt.pieces()) {
    pieces->push_back({static_cast<int>(p.id()), p.begin(), p.end()});
  }
  return true;
}

std::string SpmBackend::Decode(const std::vector<int>& ids) const {
  return impl_->processor.DecodeIds(ids);
}

std::string SpmBackend::IdToPiece(int id) const { return impl_->processor.IdToPiece(id); }
int SpmBackend::size() const { return impl_->processor.GetPieceSize(); }
bool SpmBackend::IsControl(int id) const { return impl_->processor.IsControl(id); }
bool SpmBackend::IsUnknown(int id) const { return impl_->processor.IsUnknown(id); }
bool SpmBackend::IsByte(int id) const { return impl_->processor.IsByte(id); }
int SpmBackend::bos_id() const { return impl_->processor.bos_id(); }

}  // namespace attnscope::tokenizer
