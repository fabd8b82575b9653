// CHECK failure reporting.
#include "anvil/core/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "anvil/core/child_groups.h"

namespace anvil {
namespace {

std::atomic<int> g_rank{-1};

void DefaultHandler(const char* file, int line, const std::string& message) {
  const int rank = g_rank.load();
  if (rank >= 0) {
    std::fprintf(stderr, "[rank %d] CHECK failed at %s:%d: %s\n", rank, file, line,
                 message.c_str());
  } else {
    std::fprintf(stderr, "CHECK failed at %s:%d: %s\n", file, line, message.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

std::atomic<CheckFailureHandler> g_handler{&DefaultHandler};

}  // namespace

void SetCheckFailureHandler(CheckFailureHandler handler) {
  g_handler.store(handler ? handler : &DefaultHandler);
}

void SetCheckRank(int rank) { g_rank.store(rank); }

void CheckFailed(const char* file, int line, const std::string& message) {
  // The process is about to end: the commands it started in groups of
  // their own (reward commands) end with it, not after it.
  EndChildGroups();
  g_handler.load()(file, line, message);
  std::abort();  // A handler must not return; make sure of it.
}

namespace detail {

CheckMessage::CheckMessage(const char* file, int line, const char* condition)
    : file_(file), line_(line), message_(condition) {
  message_ += " ";
}

CheckMessage::~CheckMessage() { CheckFailed(file_, line_, message_); }

}  // namespace detail
}  // namespace anvil
