// Always-on invariant checks. A broken invariant is a bug, not an input
// problem: the handler prints rank, file:line and the message, then aborts the
// whole job (under MPI one rank exiting alone would hang the others).
// Recoverable problems use Status/Result (status.h) instead.
#pragma once

#include <string>

namespace anvil {

// Called when a CHECK fails. The default prints to stderr and aborts. A
// process that runs under MPI installs a handler that aborts the communicator.
using CheckFailureHandler = void (*)(const char* file, int line, const std::string& message);
void SetCheckFailureHandler(CheckFailureHandler handler);

// The rank printed in failure messages (-1: not part of a multi-rank job).
void SetCheckRank(int rank);

[[noreturn]] void CheckFailed(const char* file, int line, const std::string& message);

namespace detail {
// Collects `CHECK(x) << "context"` and fires on destruction.
class CheckMessage {
 public:
  CheckMessage(const char* file, int line, const char* condition);
  ~CheckMessage();  // Never returns: calls CheckFailed.
  template <typename T>
  CheckMessage& operator<<(const T& value) {
    Append(value);
    return *this;
  }

 private:
  void Append(const std::string& s) { message_ += s; }
  void Append(const char* s) { message_ += s; }
  void Append(char c) { message_ += c; }
  void Append(bool b) { message_ += b ? "true" : "false"; }
  template <typename T>
  void Append(const T& v) { message_ += std::to_string(v); }

  const char* file_;
  int line_;
  std::string message_;
};
// Lets the CHECK macro be an expression of type void.
struct Voidify {
  void operator&(const CheckMessage&) {}
};
}  // namespace detail

}  // namespace anvil

#define ANVIL_PREDICT_FALSE(x) __builtin_expect(!!(x), 0)

// CHECK(cond) << "what was expected": always on, also in release builds.
#define CHECK(cond)                              \
  ANVIL_PREDICT_FALSE(cond)                      \
  ? (void)0                                      \
  : ::anvil::detail::Voidify() & ::anvil::detail::CheckMessage(__FILE__, __LINE__, #cond)

#define ANVIL_CHECK_OP(a, op, b) \
  CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_EQ(a, b) ANVIL_CHECK_OP(a, ==, b)
#define CHECK_NE(a, b) ANVIL_CHECK_OP(a, !=, b)
#define CHECK_LT(a, b) ANVIL_CHECK_OP(a, <, b)
#define CHECK_LE(a, b) ANVIL_CHECK_OP(a, <=, b)
#define CHECK_GT(a, b) ANVIL_CHECK_OP(a, >, b)
#define CHECK_GE(a, b) ANVIL_CHECK_OP(a, >=, b)

// DCHECK: debug builds only (compiled out, arguments unevaluated, with NDEBUG).
#ifdef NDEBUG
#define DCHECK(cond) \
  while (false) CHECK(cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
