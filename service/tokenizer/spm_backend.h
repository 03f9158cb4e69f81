// A thin, absl-free wrapper around Debian's libsentencepiece. Its header
// defines absl::string_view as std::string_view, which clashes with the
// Abseil the rest of attnscope uses, so only spm_backend.cc includes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attnscope::tokenizer {

class SpmBackend {
 public:
  struct Piece {
    int id;
    uint32_t begin;  // byte span of the piece's surface in the input
    uint32_t end;
  };

  // Loads a SentencePiece model file; nullptr with `error` set on failure.
  static std::unique_ptr<SpmBackend> Load(const std::string& path, std::string* error);
  ~SpmBackend();

  // Encodes `text` as SentencePiece does (no BOS/EOS). False with `error`.
  bool Encode(const std::string& text, std::vector<Piece>* pieces, std::string* error) const;
  std::string Decode(const std::vector<int>& ids) const;
  std::string IdToPiece(int id) const;
  int size() const;
  bool IsControl(int id) const;
  bool IsUnknown(int id) const;
  bool IsByte(int id) const;
  int bos_id() const;

 private:
  struct Impl;
  explicit SpmBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope::tokenizer
