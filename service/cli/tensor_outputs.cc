#include "service/cli/tensor_outputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/analysis/text_report.h"
#include "service/core/status_macros.h"

namespace attnscope::cli {
namespace {

constexpr int64_t kDefaultViewerMaxMb = 128;
// Fewer keys a row than this and a long row would show little: refuse.
constexpr int64_t kMinRowKeys = 16;

// "wrote FILE (12.3 MB)" on stderr, so that stdout stays the report or JSON.
void ReportWritten(const std::string& path, const char* what) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  std::cerr << "attnscope analyze: wrote " << path << " (" << what;
  if (!ec) std::cerr << ", " << absl::StrFormat("%.1f", static_cast<double>(bytes) / 1e6) << " MB";
  std::cerr << ")\n";
}

absl::Status NeedsFile(const Flags& flags, const char* flag, const std::string& file,
                       const std::string& arg = "FILE") {
  if (!flags.Has(flag) || flags.Has(file)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " selects what --", file,
                                                 " writes; give --", file, " ", arg, " too"));
}

absl::Status IndexFlag(const Flags& flags, const char* flag, std::vector<int64_t>* out) {
  if (!flags.Has(flag)) return absl::OkStatus();
  ATTNSCOPE_ASSIGN_OR_RETURN(*out,
                             engine::ParseIndexList(flags.Get(flag), absl::StrCat("--", flag)));
  return absl::OkStatus();
}

// The union of two sorted, distinct index lists.
std::vector<int64_t> Union(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

bool Wants(const engine::HeadSelection& selection, const engine::TensorPiece& piece) {
  return selection.Has(piece.layer, piece.head);
}

}  // namespace

std::vector<FlagSpec> TensorOutputFlagSpecs() {
  return {{"export"},          {"viewer"},       {"attention-layers"}, {"attention-heads"},
          {"attention-dtype"}, {"viewer-layers"}, {"viewer-heads"},     {"viewer-max-mb"}};
}

absl::StatusOr<TensorOutputFlags> ParseTensorOutputFlags(const Flags& flags,
                                                         const std::string& export_flag,
                                                         const std::string& export_arg) {
  TensorOutputFlags out;
  out.export_path = flags.Get(export_flag);
  out.viewer_path = flags.Get("viewer");
  for (const char* flag : {"attention-layers", "attention-heads", "attention-dtype"}) {
    ATTNSCOPE_RETURN_IF_ERROR(NeedsFile(flags, flag, export_flag, export_arg));
  }
  for (const char* flag : {"viewer-layers", "viewer-heads", "viewer-max-mb"}) {
    ATTNSCOPE_RETURN_IF_ERROR(NeedsFile(flags, flag, "viewer"));
  }
  ATTNSCOPE_RETURN_IF_ERROR(IndexFlag(flags, "attention-layers", &out.export_layers));
  ATTNSCOPE_RETURN_IF_ERROR(IndexFlag(flags, "attention-heads", &out.export_heads));
  ATTNSCOPE_RETURN_IF_ERROR(IndexFlag(flags, "viewer-layers", &out.viewer_layers));
  ATTNSCOPE_RETURN_IF_ERROR(IndexFlag(flags, "viewer-heads", &out.viewer_heads));
  const std::string dtype = flags.Get("attention-dtype", "float32");
  if (dtype != "float32" && dtype != "float16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--attention-dtype must be float32 or float16, got '", dtype, "'"));
  }
  out.export_float16 = dtype == "float16";
  ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t mb, flags.GetInt("viewer-max-mb", kDefaultViewerMaxMb,
                                                            1, int64_t{1} << 20));
  out.viewer_max_bytes = mb * 1000 * 1000;
  return out;
}

absl::StatusOr<std::unique_ptr<TensorOutputs>> TensorOutputs::Plan(const TensorOutputFlags& flags,
                                                                   int64_t num_layers,
                                                                   int64_t num_heads) {
  std::unique_ptr<TensorOutputs> out(new TensorOutputs());
  out->flags_ = flags;
  out->num_layers_ = num_layers;
  out->num_heads_ = num_heads;
  if (!flags.export_path.empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        out->export_heads_,
        engine::SelectHeads(flags.export_layers, flags.export_heads, num_layers, num_heads,
                            "--attention-layers", "--attention-heads"));
  }
  if (!flags.viewer_path.empty()) {
    ATTNSCOPE_ASSIGN_OR_RETURN(
        out->viewer_heads_,
        engine::SelectHeads(flags.viewer_layers, flags.viewer_heads, num_layers, num_heads,
                            "--viewer-layers", "--viewer-heads"));
  }
  return out;
}

engine::TensorRequest TensorOutputs::Request() const {
  engine::TensorRequest r;
  r.attention.layers = Union(export_heads_.layers, viewer_heads_.layers);
  r.attention.heads = Union(export_heads_.heads, viewer_heads_.heads);
  // A server sends half only for an export of half without a page: the page
  // quantises float32 weights, as a local pass gives them, and the export
  // converts them to half itself, so both files are the same either way.
  r.attention_float16 = flags_.export_float16 && flags_.viewer_path.empty();
  r.hidden_states = !flags_.export_path.empty();
  r.logits = !flags_.export_path.empty();
  return r;
}

absl::StatusOr<int64_t> TensorOutputs::ViewerRowKeys(int64_t num_tokens) const {
  if (num_tokens > engine::kViewerMaxTokens) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--viewer: a page holds at most ", engine::kViewerMaxTokens, " tokens; this prompt has ",
        num_tokens, " (--export writes any length)"));
  }
  const int64_t keys =
      engine::ViewerRowKeysFor(viewer_heads_.size(), num_tokens, flags_.viewer_max_bytes);
  if (keys >= std::min(num_tokens, kMinRowKeys)) return keys;
  // How many heads would fit at this T with kMinRowKeys keys a row.
  int64_t fit = 0;
  while (fit < viewer_heads_.size() &&
         engine::ViewerPageBound(fit + 1, num_tokens, kMinRowKeys) <= flags_.viewer_max_bytes) {
    ++fit;
  }
  // A selection that fits: whole layers when one does, else heads of one.
  const auto heads = static_cast<int64_t>(viewer_heads_.heads.size());
  std::string example = "--viewer-layers 0 --viewer-heads 0";
  if (fit >= heads) {
    const int64_t layers = fit / heads;
    example = layers == 1 ? absl::StrCat("--viewer-layers ", viewer_heads_.layers.back())
                          : absl::StrCat("--viewer-layers 0-", layers - 1);
  } else if (fit > 1) {
    example = absl::StrCat("--viewer-layers ", viewer_heads_.layers.back(), " --viewer-heads 0-",
                           fit - 1);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--viewer: a page of %d layers x %d heads at %d tokens cannot keep even the %d largest "
      "weights of each row within --viewer-max-mb %d; at this length %d heads fit: choose them "
      "with --viewer-layers and --viewer-heads (e.g. %s), or raise --viewer-max-mb",
      viewer_heads_.layers.size(), viewer_heads_.heads.size(), num_tokens, kMinRowKeys,
      flags_.viewer_max_bytes / 1000000, fit, example));
}

absl::Status TensorOutputs::CheckViewerSize(int64_t num_tokens) const {
  if (flags_.viewer_path.empty()) return absl::OkStatus();
  return ViewerRowKeys(num_tokens).status();
}

absl::Status TensorOutputs::Open() {
  if (!flags_.export_path.empty() && export_ == nullptr) {
    ATTNSCOPE_ASSIGN_OR_RETURN(export_,
                               engine::ExportWriter::Create(flags_.export_path, export_heads_,
                                                            num_layers_, flags_.export_float16));
  }
  return absl::OkStatus();
}

absl::Status TensorOutputs::Add(const engine::TensorPiece& piece) {
  if (piece.kind == engine::TensorPiece::Kind::kAttention) {
    if (!flags_.viewer_path.empty() && Wants(viewer_heads_, piece)) {
      if (viewer_ == nullptr) {
        ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t keys, ViewerRowKeys(piece.rows));
        viewer_ = std::make_unique<engine::ViewerPageBuilder>(viewer_heads_, piece.rows, keys);
      }
      ATTNSCOPE_RETURN_IF_ERROR(viewer_->Add(piece));
    }
    if (export_ != nullptr && Wants(export_heads_, piece)) {
      ATTNSCOPE_RETURN_IF_ERROR(export_->Add(piece));
    }
    return absl::OkStatus();
  }
  if (export_ != nullptr) return export_->Add(piece);
  return absl::OkStatus();
}

absl::Status TensorOutputs::Finish(const std::string& title, const engine::Prompt& prompt,
                                   const engine::AnalysisRun& run) {
  if (export_ != nullptr) {
    ATTNSCOPE_RETURN_IF_ERROR(export_->Finish(prompt.ids));
    if (!quiet_) ReportWritten(flags_.export_path, "tensors");
  }
  if (!flags_.viewer_path.empty()) {
    const auto num_tokens = static_cast<int64_t>(prompt.ids.size());
    if (viewer_ == nullptr) {  // no attention arrived: say why, as a page of no rows would
      ATTNSCOPE_ASSIGN_OR_RETURN(const int64_t keys, ViewerRowKeys(num_tokens));
      viewer_ = std::make_unique<engine::ViewerPageBuilder>(viewer_heads_, num_tokens, keys);
    }
    engine::ViewerData data;
    data.title = title;
    data.prompt_text = prompt.text;
    for (const std::string& bytes : prompt.token_bytes) {
      data.tokens.push_back(analysis::DisplayToken(bytes, 40));
    }
    data.z = run.stats.z;
    data.max_norm = run.stats.max_norm;
    data.entropy_nats = run.stats.next_token_entropy_nats;
    data.sinks = run.stats.sinks;
    data.num_layers = num_layers_;
    data.num_heads = num_heads_;
    data.num_tokens = num_tokens;
    ATTNSCOPE_RETURN_IF_ERROR(viewer_->Write(flags_.viewer_path, data));
    if (!quiet_) ReportWritten(flags_.viewer_path, "viewer page");
  }
  return absl::OkStatus();
}

}  // namespace attnscope::cli
