// Status and Result<T>: recoverable failures (bad config, missing file, corrupt
// checkpoint) travel up to main as values. A message says what failed, where
// (file, key, offset) and what to do about it. Broken invariants use CHECK.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "anvil/core/check.h"

namespace anvil {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input: config value, flag, malformed file
  kNotFound,           // missing file, key or tensor
  kIoError,            // read/write/fsync failed
  kDataLoss,           // checksum mismatch, truncated file
  kUnimplemented,      // valid request this build cannot serve
  kResourceExhausted,  // valid request this machine cannot hold (memory)
  kAborted,            // another rank of the job failed; this one stops with it
  kCancelled,          // stopped on request (a run asked to stop): not a failure
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: configs/tiny.toml: key model.dim: must be positive".
  std::string ToString() const;

  // Prepends context ("while loading checkpoint runs/x/step_100: ...").
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

// A value or the Status that explains its absence.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "a Result built from a Status needs an error status";
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    CHECK(ok()) << "value() of a failed Result: " << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    CHECK(ok()) << "value() of a failed Result: " << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << "value() of a failed Result: " << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace anvil

#define ANVIL_CONCAT_INNER(a, b) a##b
#define ANVIL_CONCAT(a, b) ANVIL_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define RETURN_IF_ERROR(expr)                       \
  do {                                              \
    ::anvil::Status anvil_status_ = (expr);         \
    if (!anvil_status_.ok()) return anvil_status_;  \
  } while (false)

// ASSIGN_OR_RETURN(auto x, MakeX()): binds the value or returns the Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(ANVIL_CONCAT(anvil_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                          \
  if (!result.ok()) return result.status();      \
  lhs = std::move(result).value()
