// Status helpers shared by every attnscope library.
//
// Libraries return absl::Status / absl::StatusOr<T>; these macros keep the
// "if (!s.ok()) return s;" pattern to one line.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ATTNSCOPE_CONCAT_INNER_(a, b) a##b
#define ATTNSCOPE_CONCAT_(a, b) ATTNSCOPE_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define ATTNSCOPE_RETURN_IF_ERROR(expr)              \
  do {                                               \
    ::absl::Status attnscope_status_ = (expr);       \
    if (!attnscope_status_.ok()) return attnscope_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its status.
#define ATTNSCOPE_ASSIGN_OR_RETURN(lhs, expr) \
  ATTNSCOPE_ASSIGN_OR_RETURN_IMPL_(ATTNSCOPE_CONCAT_(attnscope_or_, __LINE__), lhs, expr)
#define ATTNSCOPE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
