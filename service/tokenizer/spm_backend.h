// SentencePiece behind a narrow interface. Debian's libsentencepiece carries
// its own copy of protobuf and exports its symbols, which clash with the
// libprotobuf that gRPC loads (the process crashes at start-up when both are
// linked). So the library is never linked into attnscope's binaries: a small
// shared library (libattnscope_spm.so, spm_backend.cc) wraps it and is
// dlopen'ed with RTLD_LOCAL | RTLD_DEEPBIND the first time a tokenizer.model
// is loaded, keeping the two protobufs apart. Its header also defines
// absl::string_view as std::string_view, another reason to keep it out of
// the rest of the code.
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

  // Loads a SentencePiece model file through the wrapper library; nullptr
  // with `error` set when the library or the model cannot be loaded.
  static std::unique_ptr<SpmBackend> Load(const std::string& path, std::string* error);
  virtual ~SpmBackend() = default;

  // Encodes `text` as SentencePiece does (no BOS/EOS). False with `error`.
  virtual bool Encode(const std::string& text, std::vector<Piece>* pieces,
                      std::string* error) const = 0;
  virtual std::string Decode(const std::vector<int>& ids) const = 0;
  virtual std::string IdToPiece(int id) const = 0;
  virtual int size() const = 0;
  virtual bool IsControl(int id) const = 0;
  virtual bool IsUnknown(int id) const = 0;
  virtual bool IsByte(int id) const = 0;
  virtual int bos_id() const = 0;
};

}  // namespace attnscope::tokenizer

// The wrapper library's one entry point: a backend for the model at `path`,
// or nullptr with `error` set.
extern "C" attnscope::tokenizer::SpmBackend* attnscope_spm_create(const char* path,
                                                                  std::string* error);
