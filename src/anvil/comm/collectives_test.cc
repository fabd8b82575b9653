// Every collective against a reference computed on each rank from every
// rank's inputs (which are a formula of rank, case and index): sizes 0, 1,
// primes and sizes that do not divide by the group; every type; sum and max;
// blocking and asynchronous (several in flight, waited on in reverse);
// sub-groups from Split; send/recv; barrier. Reductions must match the rank-
// order fold bit for bit. Run by ctest on 1..4 ranks (scripts/mpirun_test.sh).
// With --fault=check|hang it injects a fault instead (comm_faults_test.sh).
#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/core/rng.h"

namespace anvil::comm {
namespace {

int g_failures = 0;
Group* g_world = nullptr;

void Fail(const std::string& what) {
  ++g_failures;
  if (g_failures <= 20) std::fprintf(stderr, "[rank %d] FAIL %s\n", g_world->rank(), what.c_str());
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Values spread over many binades, so any other summation order changes bits.
template <typename T>
T Value(int rank, int kase, int64_t i) {
  const uint64_t h = Mix((static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(kase) << 32) ^
                         static_cast<uint64_t>(i));
  const double unit = static_cast<double>(h >> 11) * 0x1.0p-53 * 2 - 1;
  if constexpr (std::is_same_v<T, float>) return static_cast<float>(std::ldexp(unit, int(h % 21) - 10));
  if constexpr (std::is_same_v<T, double>) return std::ldexp(unit, int(h % 41) - 20);
  if constexpr (std::is_same_v<T, BF16>) return ToBF16(static_cast<float>(std::ldexp(unit, int(h % 9) - 4)));
  if constexpr (std::is_same_v<T, int32_t>) return static_cast<int32_t>(h % 2001) - 1000;
  if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(h % 2000001) - 1000000;
  if constexpr (std::is_same_v<T, std::byte>) return static_cast<std::byte>(h & 0xff);
}

template <typename T>
bool Same(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

// The rank-order fold of element i over ranks 0..n-1.
template <typename T>
T Reference(int n, int kase, int64_t i, ReduceOp op) {
  if constexpr (std::is_same_v<T, BF16>) {
    float acc = ToFloat(Value<T>(0, kase, i));
    for (int r = 1; r < n; ++r) {
      const float x = ToFloat(Value<T>(r, kase, i));
      acc = op == ReduceOp::kSum ? acc + x : std::max(acc, x);
    }
    return ToBF16(acc);
  } else {
    T acc = Value<T>(0, kase, i);
    for (int r = 1; r < n; ++r) {
      const T x = Value<T>(r, kase, i);
      acc = op == ReduceOp::kSum ? T(acc + x) : std::max(acc, x);
    }
    return acc;
  }
}

const int64_t kSizes[] = {0, 1, 2, 3, 5, 7, 13, 31, 1000, 4099, (1 << 18) + 3};

template <typename T>
void CheckReductions(Group& g, int& kase, bool async) {
  const int n = g.size(), me = g.rank();
  std::deque<std::vector<T>> bufs;  // stable addresses while collectives are in flight
  std::vector<Handle> handles;
  std::vector<std::function<void()>> checks;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (int64_t size : kSizes) {
      // all-reduce, in place
      {
        const int k = kase++;
        auto& b = bufs.emplace_back(size);
        for (int64_t i = 0; i < size; ++i) b[i] = Value<T>(me, k, i);
        handles.push_back(g.AllReduceAsync(std::span<T>(b), op));
        if (!async) handles.back().Wait();
        checks.push_back([&b, k, n, op, size, &g] {
          for (int64_t i = 0; i < size; ++i) {
            if (!Same(b[i], Reference<T>(n, k, i, op))) {
              Fail(fmt::format("all-reduce {} {} n={} size={} i={} group={}", TypeName(TypeOf<T>()),
                               op == ReduceOp::kSum ? "sum" : "max", n, size, i, g.name()));
              return;
            }
          }
        });
      }
      // reduce-scatter into this rank's own segment (in place), uneven counts
      {
        const int k = kase++;
        auto& b = bufs.emplace_back(size);
        for (int64_t i = 0; i < size; ++i) b[i] = Value<T>(me, k, i);
        const std::vector<int64_t> counts = SplitEvenly(size, n, 3);
        int64_t off = 0;
        for (int r = 0; r < me; ++r) off += counts[r];
        handles.push_back(g.ReduceScatterAsync(std::span<const T>(b),
                                               std::span<T>(b.data() + off, counts[me]),
                                               std::span<const int64_t>(counts), op));
        if (!async) handles.back().Wait();
        checks.push_back([&b, k, n, op, off, cnt = counts[me]] {
          for (int64_t i = 0; i < cnt; ++i) {
            if (!Same(b[off + i], Reference<T>(n, k, off + i, op))) {
              Fail(fmt::format("reduce-scatter {} n={} i={}", TypeName(TypeOf<T>()), n, off + i));
              return;
            }
          }
        });
      }
    }
  }
  // Accumulating forms: out = out + r0 + r1 + ... where out is what the
  // folding rank held (the owner of the segment).
  for (int64_t size : kSizes) {
    const int k = kase++;
    auto& in = bufs.emplace_back(size);
    auto& out = bufs.emplace_back(size);
    auto& rs_out = bufs.emplace_back(size);
    for (int64_t i = 0; i < size; ++i) {
      in[i] = Value<T>(me, k, i);
      out[i] = rs_out[i] = Value<T>(me + 1000, k, i);
    }
    const std::vector<int64_t> seg = AllReduceSegments(size, n);
    int64_t off = 0;
    for (int r = 0; r < me; ++r) off += seg[r];
    handles.push_back(g.AllReduceAsync(std::span<const T>(in), std::span<T>(out), ReduceOp::kSum, true));
    if (!async) handles.back().Wait();
    handles.push_back(g.ReduceScatterAsync(std::span<const T>(in),
                                           std::span<T>(rs_out.data() + off, seg[me]),
                                           std::span<const int64_t>(seg), ReduceOp::kSum, true));
    if (!async) handles.back().Wait();
    checks.push_back([&out, &rs_out, k, n, me, seg, off, size] {
      auto expect = [&](int owner, int64_t i) {
        if constexpr (std::is_same_v<T, BF16>) {
          float acc = ToFloat(Value<T>(owner + 1000, k, i));
          for (int r = 0; r < n; ++r) acc += ToFloat(Value<T>(r, k, i));
          return ToBF16(acc);
        } else {
          T acc = Value<T>(owner + 1000, k, i);
          for (int r = 0; r < n; ++r) acc = T(acc + Value<T>(r, k, i));
          return acc;
        }
      };
      int64_t begin = 0;
      for (int owner = 0; owner < n; ++owner) {
        for (int64_t i = begin; i < begin + seg[owner]; ++i) {
          if (!Same(out[i], expect(owner, i))) {
            Fail(fmt::format("accumulating all-reduce {} n={} size={} i={}", TypeName(TypeOf<T>()), n, size, i));
            return;
          }
          if (owner == me && !Same(rs_out[i], expect(me, i))) {
            Fail(fmt::format("accumulating reduce-scatter {} n={} i={}", TypeName(TypeOf<T>()), n, i));
            return;
          }
        }
        begin += seg[owner];
      }
      (void)off;
    });
  }
  for (size_t i = handles.size(); i-- > 0;) handles[i].Wait();
  for (auto& c : checks) c();
}

template <typename T>
void CheckMoves(Group& g, int& kase) {
  const int n = g.size(), me = g.rank();
  for (int64_t size : kSizes) {
    // all-gather with uneven segments, in place
    {
      const int k = kase++;
      const std::vector<int64_t> counts = SplitEvenly(size, n, 5);
      std::vector<T> out(size);
      int64_t off = 0;
      for (int r = 0; r < me; ++r) off += counts[r];
      for (int64_t i = 0; i < counts[me]; ++i) out[off + i] = Value<T>(me, k, off + i);
      g.AllGather(std::span<const T>(out.data() + off, counts[me]), std::span<T>(out),
                  std::span<const int64_t>(counts));
      int64_t begin = 0;
      for (int r = 0; r < n; ++r) {
        for (int64_t i = begin; i < begin + counts[r]; ++i) {
          if (!Same(out[i], Value<T>(r, k, i))) {
            Fail(fmt::format("all-gather {} n={} size={} i={}", TypeName(TypeOf<T>()), n, size, i));
            break;
          }
        }
        begin += counts[r];
      }
    }
    // broadcast from the last rank
    {
      const int k = kase++;
      std::vector<T> b(size);
      for (int64_t i = 0; i < size; ++i) b[i] = Value<T>(me, k, i);
      g.Broadcast(std::span<T>(b), n - 1);
      for (int64_t i = 0; i < size; ++i) {
        if (!Same(b[i], Value<T>(n - 1, k, i))) {
          Fail(fmt::format("broadcast {} n={} size={} i={}", TypeName(TypeOf<T>()), n, size, i));
          break;
        }
      }
    }
  }
  // all-to-all(v): rank r sends (r + j + size) % 7 elements to rank j.
  for (int64_t size : {0, 1, 5, 1000}) {
    const int k = kase++;
    auto amount = [&](int from, int to) { return (from + to + size) % 7 + (size > 100 ? size : 0); };
    std::vector<int64_t> send_counts(n), recv_counts(n);
    int64_t send_total = 0, recv_total = 0;
    for (int j = 0; j < n; ++j) {
      send_counts[j] = amount(me, j);
      recv_counts[j] = amount(j, me);
      send_total += send_counts[j];
      recv_total += recv_counts[j];
    }
    std::vector<T> in(send_total), out(recv_total);
    int64_t off = 0;
    for (int j = 0; j < n; ++j) {
      for (int64_t i = 0; i < send_counts[j]; ++i) in[off + i] = Value<T>(me, k, j * 100000 + i);
      off += send_counts[j];
    }
    g.AllToAll(std::span<const T>(in), std::span<const int64_t>(send_counts), std::span<T>(out),
               std::span<const int64_t>(recv_counts));
    off = 0;
    for (int j = 0; j < n; ++j) {
      for (int64_t i = 0; i < recv_counts[j]; ++i) {
        if (!Same(out[off + i], Value<T>(j, k, me * 100000 + i))) {
          Fail(fmt::format("all-to-all {} n={} from={} i={}", TypeName(TypeOf<T>()), n, j, i));
          break;
        }
      }
      off += recv_counts[j];
    }
  }
}

void CheckGroup(Group& g, int& kase) {
  for (bool async : {false, true}) {
    CheckReductions<float>(g, kase, async);
    CheckReductions<BF16>(g, kase, async);
    CheckReductions<double>(g, kase, async);
    CheckReductions<int32_t>(g, kase, async);
    CheckReductions<int64_t>(g, kase, async);
  }
  CheckMoves<float>(g, kase);
  CheckMoves<std::byte>(g, kase);
  CheckMoves<int64_t>(g, kase);
  // send/recv around a ring, both directions in flight at once
  if (g.size() > 1) {
    const int n = g.size(), me = g.rank(), k = kase++;
    std::vector<float> out(777), in(777);
    for (int64_t i = 0; i < 777; ++i) out[i] = Value<float>(me, k, i);
    Handle s = g.SendAsync(std::span<const float>(out), (me + 1) % n, 5);
    Handle r = g.RecvAsync(std::span<float>(in), (me + n - 1) % n, 5);
    r.Wait();
    s.Wait();
    for (int64_t i = 0; i < 777; ++i) {
      if (!Same(in[i], Value<float>((me + n - 1) % n, k, i))) {
        Fail(fmt::format("send/recv n={} i={}", n, i));
        break;
      }
    }
  }
  g.Barrier();
}

// Faults for tests/comm/comm_faults_test.sh: the last rank fails a CHECK, or
// skips a collective (hangs), while the others wait in an all-reduce.
int InjectFault(Group& w, const std::string& fault) {
  SetDiagnosticStep(7);
  if (w.rank() == w.size() - 1) {
    if (fault == "check") CHECK(false) << "injected failure";
    if (fault == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  std::vector<float> x(100, 1.0f);
  w.AllReduce(std::span<float>(x));
  FinalizeWorld();
  return 0;
}

int Main(int argc, char** argv) {
  const std::string fault = argc > 1 ? std::string(argv[1]) : std::string();
  auto world = InitWorld({.timeout_s = fault.empty() ? 120.0 : 3.0});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  Group& w = **world;
  g_world = &w;
  if (fault.rfind("--fault=", 0) == 0) return InjectFault(w, fault.substr(8));
  int kase = 0;
  CheckGroup(w, kase);
  // Sub-groups: even and odd ranks, ordered backwards (key = -rank).
  std::unique_ptr<Group> sub = w.Split(w.rank() % 2, -w.rank(), "parity");
  const int expected_size = (w.size() + (w.rank() % 2 == 0 ? 1 : 0)) / 2;
  if (sub->size() != expected_size) Fail(fmt::format("split size {} != {}", sub->size(), expected_size));
  if (sub->world_ranks()[sub->rank()] != w.rank()) Fail("split: world rank of self");
  int sub_kase = 100000;
  CheckGroup(*sub, sub_kase);
  sub.reset();
  const int64_t failures = w.AllReduceValue<int64_t>(g_failures);
  if (w.rank() == 0) {
    std::printf("%s: %d ranks, %d cases each, %lld failures\n", failures ? "FAILED" : "ok", w.size(),
                kase, static_cast<long long>(failures));
  }
  FinalizeWorld();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace anvil::comm

int main(int argc, char** argv) { return anvil::comm::Main(argc, argv); }
