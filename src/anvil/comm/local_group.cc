// LocalGroup: a size-1 group's collectives are copies of its own segment.
#include "anvil/comm/local_group.h"

#include <cstring>

#include "anvil/comm/fold.h"

namespace anvil::comm {

std::unique_ptr<Group> LocalGroup::Split(int, int, const std::string& name) {
  return std::make_unique<LocalGroup>(this->name() + "/" + name);
}

Handle LocalGroup::Start(Request r) {
  const size_t es = static_cast<size_t>(TypeSize(r.type));
  auto copy = [&](const void* from, void* to, int64_t count) {
    if (from != to && count > 0) std::memmove(to, from, static_cast<size_t>(count) * es);
  };
  auto reduce = [&](int64_t count) {
    if (r.accumulate) {
      const void* inputs[2] = {r.recv, r.send};
      FoldInOrder(r.type, r.op, inputs, r.recv, count);
    } else {
      copy(r.send, r.recv, count);
    }
  };
  switch (r.kind) {
    case Request::Kind::kAllReduce:
      reduce(r.count);
      break;
    case Request::Kind::kReduceScatter:
      reduce(r.counts[0]);
      break;
    case Request::Kind::kBroadcast:
      copy(r.send, r.recv, r.count);
      break;
    case Request::Kind::kAllGather:
      copy(r.send, r.recv, r.counts[0]);
      break;
    case Request::Kind::kAllToAll:
      CHECK_EQ(r.counts[0], r.recv_counts[0]) << "all-to-all on " << name() << ": sizes differ";
      copy(r.send, r.recv, r.counts[0]);
      break;
    case Request::Kind::kSend:
    case Request::Kind::kRecv:
      CHECK(false) << "send/recv on group " << name() << " of one rank";
      break;
    case Request::Kind::kBarrier:
      break;
  }
  return Handle();
}

}  // namespace anvil::comm
