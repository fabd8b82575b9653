// A communication group: the ranks that take part in a collective, with the
// collectives the trainer needs on spans of f32, bf16, f64, i32, i64 and
// bytes. Every collective exists blocking and asynchronous (a Handle with
// Wait/Test); the blocking form is the asynchronous one waited on.
//
// Determinism: a sum is a left fold in rank order, r0 + r1 + r2 + ..., one
// IEEE add per rank in the element's own type (bf16: the fold runs in f32 and
// rounds once at the end), whatever the transport and the order in which
// ranks arrive. Every rank holds the same bits afterwards. This is what makes
// data parallelism over N ranks train bitwise the model of one process that
// accumulates the same N micro-batches (parallel/data_parallel.h).
//
// Ordering: collectives run one at a time in the order a rank issues them, and
// every rank of a group must issue the same collectives in the same order
// (MPI's rule). Buffers belong to the collective until its Handle completes.
//
// Backends: the local group (size 1; everything is a copy) and MPI
// (mpi_world.h, the only code that sees <mpi.h>). Groups are split by color
// into sub-groups (data, tensor, pipeline... parallel groups).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "anvil/core/bf16.h"
#include "anvil/core/check.h"
#include "anvil/core/status.h"

namespace anvil::comm {

// Element types a collective moves (bytes: moved, never reduced).
enum class Type : uint8_t { kF32, kBF16, kF64, kI32, kI64, kBytes };
enum class ReduceOp : uint8_t { kSum, kMax };

int TypeSize(Type t);
const char* TypeName(Type t);

template <typename T> constexpr Type TypeOf();
template <> constexpr Type TypeOf<float>() { return Type::kF32; }
template <> constexpr Type TypeOf<BF16>() { return Type::kBF16; }
template <> constexpr Type TypeOf<double>() { return Type::kF64; }
template <> constexpr Type TypeOf<int32_t>() { return Type::kI32; }
template <> constexpr Type TypeOf<int64_t>() { return Type::kI64; }
template <> constexpr Type TypeOf<std::byte>() { return Type::kBytes; }

// The completion of an asynchronous collective. Default-constructed: done.
class Handle {
 public:
  struct State;  // owned by the backend that runs the collective
  Handle() = default;
  explicit Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // Blocks (sleeping, not spinning) until the collective is complete.
  void Wait();
  // True once complete; never blocks.
  bool Test() const;

 private:
  std::shared_ptr<State> state_;
};

// One collective as a backend receives it. Counts are in elements of `type`;
// `counts` (one per rank) describe the v-variants' segments, laid out back to
// back in rank order.
struct Request {
  enum class Kind : uint8_t {
    kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll, kSend, kRecv, kBarrier
  };
  Kind kind = Kind::kBarrier;
  Type type = Type::kBytes;
  ReduceOp op = ReduceOp::kSum;
  // All-reduce and reduce-scatter: fold into what `recv` holds, first in the
  // fold (recv = recv op r0 op r1 ...); `recv` must not overlap `send`.
  bool accumulate = false;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;                  // all-reduce, broadcast, send/recv
  std::vector<int64_t> counts;        // reduce-scatter, all-gather, all-to-all: sent per rank
  std::vector<int64_t> recv_counts;   // all-to-all: received per rank
  int peer = -1;                      // broadcast: root; send/recv: the other rank
  int tag = 0;                        // send/recv
};
const char* KindName(Request::Kind kind);

class Group {
 public:
  virtual ~Group() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Where it sits in the job ("world", "world/dp", ...); named in errors.
  const std::string& name() const { return name_; }
  // The job-wide rank of each member, in group rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // The ranks with the same color form a sub-group, ordered by (key, rank).
  // Collective over this group.
  virtual std::unique_ptr<Group> Split(int color, int key, const std::string& name) = 0;
  // Starts a collective (the typed calls below build the Request).
  virtual Handle Start(Request request) = 0;

  // data[i] = fold over ranks of data[i] (in place).
  template <typename T>
  Handle AllReduceAsync(std::span<T> data, ReduceOp op = ReduceOp::kSum) {
    Request r = Make<T>(Request::Kind::kAllReduce, data.data(), data.data(), Count(data));
    r.op = op;
    return Start(std::move(r));
  }
  // out = out op fold of every rank's `in` (accumulate), or = that fold: an
  // all-reduce that adds into another buffer, so contributions gathered over
  // several calls fold in one order: ((acc + r0) + r1) + ... The fold of
  // rank r's segment (AllReduceSegments) runs on rank r.
  template <typename T>
  Handle AllReduceAsync(std::span<const T> in, std::span<T> out, ReduceOp op, bool accumulate) {
    CHECK_EQ(in.size(), out.size()) << "all-reduce on group " << name_ << ": sizes differ";
    CHECK(!accumulate || !Overlap(in, out)) << "accumulating all-reduce in place";
    Request r = Make<T>(Request::Kind::kAllReduce, in.data(), out.data(), Count(in));
    r.op = op;
    r.accumulate = accumulate;
    return Start(std::move(r));
  }
  // Rank r receives, in `out`, the fold of every rank's segment r of `in`
  // (segments of counts[0], counts[1], ... elements, back to back). `out` may
  // be rank r's own segment of `in` (in place) unless `accumulate`, which
  // folds into what `out` holds (out = out op r0 op r1 ...).
  template <typename T>
  Handle ReduceScatterAsync(std::span<const T> in, std::span<T> out,
                            std::span<const int64_t> counts, ReduceOp op = ReduceOp::kSum,
                            bool accumulate = false) {
    CheckSegments(counts, Count(in), Count(out), "reduce-scatter");
    CHECK(!accumulate || !Overlap(in, out)) << "accumulating reduce-scatter in place";
    Request r = Make<T>(Request::Kind::kReduceScatter, in.data(), out.data(), Count(in));
    r.op = op;
    r.accumulate = accumulate;
    r.counts.assign(counts.begin(), counts.end());
    return Start(std::move(r));
  }
  // out = every rank's `in` back to back in rank order (rank r's of
  // counts[r] elements). `in` may be rank r's own segment of `out` (in place).
  template <typename T>
  Handle AllGatherAsync(std::span<const T> in, std::span<T> out, std::span<const int64_t> counts) {
    CheckSegments(counts, Count(out), Count(in), "all-gather");
    Request r = Make<T>(Request::Kind::kAllGather, in.data(), out.data(), Count(out));
    r.counts.assign(counts.begin(), counts.end());
    return Start(std::move(r));
  }
  // Every rank's data = root's data.
  template <typename T>
  Handle BroadcastAsync(std::span<T> data, int root) {
    CHECK(root >= 0 && root < size_) << "broadcast root " << root << " outside group " << name_;
    Request r = Make<T>(Request::Kind::kBroadcast, data.data(), data.data(), Count(data));
    r.peer = root;
    return Start(std::move(r));
  }
  // Rank r sends send_counts[j] elements (segments back to back in `in`) to
  // rank j, and receives recv_counts[j] from rank j (back to back in `out`).
  template <typename T>
  Handle AllToAllAsync(std::span<const T> in, std::span<const int64_t> send_counts,
                       std::span<T> out, std::span<const int64_t> recv_counts) {
    CheckSegments(send_counts, Count(in), -1, "all-to-all send");
    CheckSegments(recv_counts, Count(out), -1, "all-to-all receive");
    Request r = Make<T>(Request::Kind::kAllToAll, in.data(), out.data(), Count(in));
    r.counts.assign(send_counts.begin(), send_counts.end());
    r.recv_counts.assign(recv_counts.begin(), recv_counts.end());
    return Start(std::move(r));
  }
  template <typename T>
  Handle SendAsync(std::span<const T> data, int peer, int tag = 0) {
    CheckPeer(peer);
    Request r = Make<T>(Request::Kind::kSend, data.data(), nullptr, Count(data));
    r.peer = peer;
    r.tag = tag;
    return Start(std::move(r));
  }
  // Receives exactly data.size() elements (a different size is a CHECK failure).
  template <typename T>
  Handle RecvAsync(std::span<T> data, int peer, int tag = 0) {
    CheckPeer(peer);
    Request r = Make<T>(Request::Kind::kRecv, nullptr, data.data(), Count(data));
    r.peer = peer;
    r.tag = tag;
    return Start(std::move(r));
  }
  Handle BarrierAsync() { return Start(Make<std::byte>(Request::Kind::kBarrier, nullptr, nullptr, 0)); }

  // The blocking forms.
  template <typename T>
  void AllReduce(std::span<T> data, ReduceOp op = ReduceOp::kSum) { AllReduceAsync(data, op).Wait(); }
  template <typename T>
  void ReduceScatter(std::span<const T> in, std::span<T> out, std::span<const int64_t> counts,
                     ReduceOp op = ReduceOp::kSum) {
    ReduceScatterAsync(in, out, counts, op).Wait();
  }
  template <typename T>
  void AllGather(std::span<const T> in, std::span<T> out, std::span<const int64_t> counts) {
    AllGatherAsync(in, out, counts).Wait();
  }
  template <typename T>
  void Broadcast(std::span<T> data, int root) { BroadcastAsync(data, root).Wait(); }
  template <typename T>
  void AllToAll(std::span<const T> in, std::span<const int64_t> send_counts, std::span<T> out,
                std::span<const int64_t> recv_counts) {
    AllToAllAsync(in, send_counts, out, recv_counts).Wait();
  }
  template <typename T>
  void Send(std::span<const T> data, int peer, int tag = 0) { SendAsync(data, peer, tag).Wait(); }
  template <typename T>
  void Recv(std::span<T> data, int peer, int tag = 0) { RecvAsync(data, peer, tag).Wait(); }
  void Barrier() { BarrierAsync().Wait(); }

  // One value through a blocking all-reduce (step counts, maxima).
  template <typename T>
  T AllReduceValue(T value, ReduceOp op = ReduceOp::kSum) {
    AllReduce(std::span<T>(&value, 1), op);
    return value;
  }

 protected:
  Group(int rank, int size, std::string name, std::vector<int> world_ranks)
      : rank_(rank), size_(size), name_(std::move(name)), world_ranks_(std::move(world_ranks)) {}

 private:
  template <typename T>
  static int64_t Count(std::span<T> s) { return static_cast<int64_t>(s.size()); }
  template <typename A, typename B>
  static bool Overlap(std::span<A> a, std::span<B> b) {
    const auto* a0 = reinterpret_cast<const std::byte*>(a.data());
    const auto* b0 = reinterpret_cast<const std::byte*>(b.data());
    return !a.empty() && !b.empty() && a0 < b0 + b.size_bytes() && b0 < a0 + a.size_bytes();
  }
  template <typename T>
  static Request Make(Request::Kind kind, const void* send, void* recv, int64_t count) {
    Request r;
    r.kind = kind;
    r.type = TypeOf<std::remove_const_t<T>>();
    r.send = send;
    r.recv = recv;
    r.count = count;
    return r;
  }
  // counts has one entry >= 0 per rank summing to `total`; counts[rank] ==
  // `mine` unless mine < 0.
  void CheckSegments(std::span<const int64_t> counts, int64_t total, int64_t mine,
                     const char* what) const;
  void CheckPeer(int peer) const;

  int rank_, size_;
  std::string name_;
  std::vector<int> world_ranks_;
};

// The segment of an all-reduce of n elements each rank folds (rank r: the
// r-th of SplitEvenly(n, size, 16)); a reduce-scatter with these counts
// leaves each rank the part an all-reduce's fold would.
std::vector<int64_t> AllReduceSegments(int64_t n, int size);

// Equal-as-possible segments of n elements over `parts` ranks, each a
// multiple of `align` elements except the last non-empty one (the first
// segments get the extra blocks): the shards of a flat buffer.
std::vector<int64_t> SplitEvenly(int64_t n, int parts, int64_t align = 1);

// Every rank of `group` calls it with its own outcome of `what`: a rank's
// failure is returned as is, and a rank that did not fail gets Aborted
// ("what: another rank failed"), so that all go on or none.
Status AgreeOnStatus(Group& group, const Status& mine, std::string_view what);

}  // namespace anvil::comm
