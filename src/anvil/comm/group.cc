// Group's typed front end: argument checks, Handle, shard splitting.
#include "anvil/comm/group.h"

#include <fmt/core.h>

#include <numeric>

#include "anvil/comm/handle_state.h"
#include "anvil/profile/trace.h"

namespace anvil::comm {

int TypeSize(Type t) {
  switch (t) {
    case Type::kF32: return 4;
    case Type::kBF16: return 2;
    case Type::kF64: return 8;
    case Type::kI32: return 4;
    case Type::kI64: return 8;
    case Type::kBytes: return 1;
  }
  return 1;
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kF32: return "f32";
    case Type::kBF16: return "bf16";
    case Type::kF64: return "f64";
    case Type::kI32: return "i32";
    case Type::kI64: return "i64";
    case Type::kBytes: return "bytes";
  }
  return "?";
}

const char* KindName(Request::Kind kind) {
  switch (kind) {
    case Request::Kind::kAllReduce: return "all-reduce";
    case Request::Kind::kReduceScatter: return "reduce-scatter";
    case Request::Kind::kAllGather: return "all-gather";
    case Request::Kind::kBroadcast: return "broadcast";
    case Request::Kind::kAllToAll: return "all-to-all";
    case Request::Kind::kSend: return "send";
    case Request::Kind::kRecv: return "recv";
    case Request::Kind::kBarrier: return "barrier";
  }
  return "?";
}

void Handle::Wait() {
  if (!state_ || state_->done.load(std::memory_order_acquire)) return;
  ANVIL_TRACE_ZONE("comm_wait");  // the time a caller waited: communication not hidden
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done.load(std::memory_order_acquire); });
}

bool Handle::Test() const { return !state_ || state_->done.load(std::memory_order_acquire); }

void Group::CheckSegments(std::span<const int64_t> counts, int64_t total, int64_t mine,
                          const char* what) const {
  CHECK_EQ(static_cast<int>(counts.size()), size_)
      << what << " on group " << name_ << ": one count per rank";
  int64_t sum = 0;
  for (int64_t c : counts) {
    CHECK_GE(c, 0) << what << " on group " << name_ << ": negative count";
    sum += c;
  }
  CHECK_EQ(sum, total) << what << " on group " << name_ << ": counts must sum to the buffer";
  if (mine >= 0) {
    CHECK_EQ(counts[rank_], mine) << what << " on group " << name_ << ": this rank's segment";
  }
}

void Group::CheckPeer(int peer) const {
  CHECK(peer >= 0 && peer < size_ && peer != rank_)
      << "peer " << peer << " of rank " << rank_ << " in group " << name_ << " of size " << size_;
}

std::vector<int64_t> AllReduceSegments(int64_t n, int size) { return SplitEvenly(n, size, 16); }

std::vector<int64_t> SplitEvenly(int64_t n, int parts, int64_t align) {
  CHECK(parts > 0 && align > 0 && n >= 0) << "SplitEvenly(" << n << ", " << parts << ", " << align << ")";
  const int64_t blocks = (n + align - 1) / align;
  std::vector<int64_t> counts(parts);
  int64_t begin = 0;
  for (int p = 0; p < parts; ++p) {
    const int64_t b = blocks / parts + (p < blocks % parts ? 1 : 0);
    const int64_t end = std::min(n, begin + b * align);
    counts[p] = end - begin;
    begin = end;
  }
  return counts;
}

Status AgreeOnStatus(Group& group, const Status& mine, std::string_view what) {
  if (group.size() == 1) return mine;
  const int32_t failed = group.AllReduceValue<int32_t>(mine.ok() ? 0 : 1);
  if (!mine.ok() || failed == 0) return mine;
  return Aborted(fmt::format("{}: another rank failed (its error is on its output)", what));
}

}  // namespace anvil::comm
