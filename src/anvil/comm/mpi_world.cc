// The MPI backend and InitWorld (world.h). The only file that includes
// <mpi.h>.
//
// Every collective is point-to-point messages (MPI_Isend/MPI_Irecv) posted by
// one communication thread, which then polls them with MPI_Testsome: a short
// spin, then sleeps that grow to 50 µs, so an idle wait leaves the cores to
// the compute threads (MPI's own blocking calls spin). Each collective gets
// its own tag from a per-group sequence number, so several can be in flight
// and a two-phase one (all-reduce = reduce-scatter, then all-gather) can
// never match another's messages. Reductions fold the received segments in
// rank order (fold.h).
//
// Data volume per rank is that of a ring: a reduce-scatter or all-gather of n
// elements sends (N-1)/N of n; an all-reduce twice that.
#include <fmt/core.h>
#include <mpi.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include "anvil/comm/fold.h"
#include "anvil/comm/handle_state.h"
#include "anvil/comm/local_group.h"
#include "anvil/comm/world.h"
#include "anvil/core/child_groups.h"
#include "anvil/profile/trace.h"

namespace anvil::comm {
namespace {

constexpr int kUserTagLimit = 1 << 16;  // Send/Recv tags are below this
constexpr int kTagSpace = 1 << 14;      // collectives: kUserTagLimit + sequence % kTagSpace
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;
constexpr double kSpinSeconds = 50e-6;  // poll without sleeping this long after progress
constexpr long kMaxSleepNs = 50'000;

std::atomic<int64_t> g_step{-1};

using Clock = std::chrono::steady_clock;

// One collective in flight on the communication thread.
struct Job {
  Request req;
  std::shared_ptr<Handle::State> state;
  MPI_Comm comm = MPI_COMM_NULL;
  const Group* group = nullptr;
  int tag = 0;
  int64_t sequence = 0;
  int phase = 0;
  std::vector<MPI_Request> pending;
  std::vector<int> pending_peer;     // group rank of each request
  std::vector<char> pending_recv;    // 1: a receive
  std::vector<int> pending_bytes;    // the size of each piece
  std::vector<std::byte> staging;    // received segments to fold, slot per rank (pooled)
  std::vector<int64_t> offsets;      // segment offsets (elements)
  Clock::time_point start;
  int64_t trace_begin_ns = -1;  // when tracing: the trace clock at posting
  int64_t bytes_sent = 0;
};

class MpiRuntime;
MpiRuntime* g_runtime = nullptr;

[[noreturn]] void AbortJob(const std::string& message) {
  EndChildGroups();  // (none outlives the job; a CHECK has ended them already)
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::atomic<int> g_world_rank{-1};

void MpiCheckHandler(const char* file, int line, const std::string& message) {
  AbortJob(fmt::format("[rank {}] CHECK failed at {}:{}: {}", g_world_rank.load(), file, line,
                       message));
}

class MpiGroup final : public Group {
 public:
  MpiGroup(MPI_Comm comm, int rank, int size, std::string name, std::vector<int> world_ranks)
      : Group(rank, size, std::move(name), std::move(world_ranks)), comm_(comm) {}
  ~MpiGroup() override;
  std::unique_ptr<Group> Split(int color, int key, const std::string& name) override;
  Handle Start(Request request) override;

 private:
  MPI_Comm comm_;
  int64_t sequence_ = 0;  // collectives started; the same on every rank
};

class MpiRuntime {
 public:
  MpiRuntime(int world_rank, double timeout_s) : world_rank_(world_rank), timeout_s_(timeout_s) {
    thread_ = std::thread([this] {
      // Linux rounds a sleep up by the thread's timer slack (50 µs by
      // default): the short sleeps of the poll loop must be short.
      prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
      Loop();
    });
  }

  void set_timeout(double s) { timeout_s_.store(s); }

  // Runs fn on the communication thread once no collective is in flight, and
  // waits for it (setup calls such as MPI_Comm_split, MPI_Comm_free). MPI is
  // called from this thread alone, but for MPI_Init/MPI_Finalize (the main
  // thread) and MPI_Abort (any thread whose CHECK fails).
  void RunSync(std::function<void()> fn) {
    auto state = std::make_shared<Handle::State>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back([fn = std::move(fn), state] {
        fn();
        state->Complete();
      });
    }
    cv_.notify_one();
    Handle(state).Wait();
  }

  void Submit(std::unique_ptr<Job> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  // Finishes the queued work, then stops the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void Loop() {
    std::list<std::unique_ptr<Job>> active;
    Clock::time_point last_progress = Clock::now();
    long sleep_ns = 0;
    for (;;) {
      std::deque<std::unique_ptr<Job>> incoming;
      std::deque<std::function<void()>> tasks;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (active.empty()) {
          cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !tasks_.empty(); });
          if (stopping_ && queue_.empty() && tasks_.empty()) return;
        }
        incoming.swap(queue_);
        // Setup tasks (split, free a communicator) wait until every
        // collective issued before them has finished.
        if (active.empty() && incoming.empty()) tasks.swap(tasks_);
      }
      for (auto& t : tasks) t();
      for (auto& job : incoming) {
        job->start = Clock::now();
        if (profile::Tracer::enabled()) job->trace_begin_ns = profile::trace_detail::NowNs();
        Post(*job, staging_pool_);
        active.push_back(std::move(job));
        last_progress = Clock::now();
        sleep_ns = 0;
      }
      bool progressed = false;
      for (auto it = active.begin(); it != active.end();) {
        Job& job = **it;
        if (Progress(job)) {
          progressed = true;
          if (Advance(job)) {
            Recycle(std::move(job.staging));
            // A zone on this thread from posting to completion: beside the
            // compute threads' zones it shows what the collective overlapped.
            if (job.trace_begin_ns >= 0) {
              profile::RecordComm(KindName(job.req.kind), job.trace_begin_ns,
                                  profile::trace_detail::NowNs(), job.bytes_sent,
                                  job.group->name().c_str());
            }
            job.state->Complete();
            it = active.erase(it);
            continue;
          }
        } else if (Seconds(job.start) > timeout_s_) {
          Timeout(job);
        }
        ++it;
      }
      if (progressed || active.empty()) {
        last_progress = Clock::now();
        sleep_ns = 0;
      } else if (Seconds(last_progress) > kSpinSeconds) {
        // Nothing moved for a while: the peers are still computing. Sleep in
        // growing steps so this thread leaves the cores to the compute threads.
        sleep_ns = std::min(kMaxSleepNs, std::max(2'000L, sleep_ns * 2));
        const timespec ts{0, sleep_ns};
        nanosleep(&ts, nullptr);
      }
    }
  }

  static double Seconds(Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  }

  // Receive buffers are reused across collectives: first touch of a fresh
  // page costs more than the copy into it.
  static std::vector<std::byte> TakeStaging(std::vector<std::vector<std::byte>>& pool, size_t bytes) {
    // The smallest pooled buffer that fits, else the largest (grown).
    auto pick = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it) {
      if (it->size() >= bytes && (pick == pool.end() || pick->size() < bytes || it->size() < pick->size())) {
        pick = it;
      } else if (it->size() < bytes && (pick == pool.end() || (pick->size() < bytes && it->size() > pick->size()))) {
        pick = it;
      }
    }
    std::vector<std::byte> b;
    if (pick != pool.end()) {
      b = std::move(*pick);
      pool.erase(pick);
    }
    if (b.size() < bytes) b.resize(bytes);
    return b;
  }
  void Recycle(std::vector<std::byte> b) {
    if (b.empty()) return;
    staging_pool_.push_back(std::move(b));
    if (staging_pool_.size() > 4) {  // keep the largest few
      std::sort(staging_pool_.begin(), staging_pool_.end(),
                [](const auto& x, const auto& y) { return x.size() > y.size(); });
      staging_pool_.resize(4);
    }
  }

  // Tests the job's requests; true when all are complete.
  static bool Progress(Job& job) {
    if (job.pending.empty()) return true;
    int done = 0;
    std::vector<int> indices(job.pending.size());
    std::vector<MPI_Status> statuses(job.pending.size());
    MPI_Testsome(static_cast<int>(job.pending.size()), job.pending.data(), &done, indices.data(),
                 statuses.data());
    // A message shorter than posted means the ranks disagree on the
    // collective's sizes (a longer one is MPI_ERR_TRUNCATE).
    for (int k = 0; k < done && done != MPI_UNDEFINED; ++k) {
      const int i = indices[k];
      if (!job.pending_recv[i]) continue;
      int got = 0;
      MPI_Get_count(&statuses[k], MPI_BYTE, &got);
      CHECK_EQ(got, job.pending_bytes[i])
          << KindName(job.req.kind) << " #" << job.sequence << " on group " << job.group->name()
          << ": rank " << job.group->world_ranks()[job.pending_peer[i]]
          << " sent another size than this rank expects";
    }
    return std::all_of(job.pending.begin(), job.pending.end(),
                       [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
  }

  [[noreturn]] void Timeout(const Job& job) {
    std::vector<int> missing;
    for (size_t i = 0; i < job.pending.size(); ++i) {
      if (job.pending[i] != MPI_REQUEST_NULL) {
        const int peer = job.group->world_ranks()[job.pending_peer[i]];
        if (std::find(missing.begin(), missing.end(), peer) == missing.end()) missing.push_back(peer);
      }
    }
    std::sort(missing.begin(), missing.end());
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    const int64_t step = g_step.load();
    AbortJob(fmt::format(
        "[rank {}] comm watchdog: {} #{} on group {} ({} x {}) did not finish within "
        "comm.timeout_s = {:g} s{}: no answer from rank{} {} (a rank that died, hangs or "
        "runs other collectives)",
        world_rank_, KindName(job.req.kind), job.sequence, job.group->name(),
        TypeName(job.req.type), job.req.count, timeout_s_.load(),
        step >= 0 ? fmt::format(" at step {}", step) : std::string(),
        missing.size() == 1 ? "" : "s", ranks));
  }

  // Posts one message as pieces of at most kMaxMessageBytes (MPI counts are int).
  static void Message(Job& job, bool receive, void* data, int64_t bytes, int peer) {
    int64_t done = 0;
    do {
      const int64_t piece = std::min(kMaxMessageBytes, bytes - done);
      MPI_Request r;
      std::byte* p = static_cast<std::byte*>(data) + done;
      if (receive) {
        MPI_Irecv(p, static_cast<int>(piece), MPI_BYTE, peer, job.tag, job.comm, &r);
      } else {
        MPI_Isend(p, static_cast<int>(piece), MPI_BYTE, peer, job.tag, job.comm, &r);
      }
      if (!receive) job.bytes_sent += piece;
      job.pending.push_back(r);
      job.pending_peer.push_back(peer);
      job.pending_recv.push_back(receive ? 1 : 0);
      job.pending_bytes.push_back(static_cast<int>(piece));
      done += piece;
    } while (done < bytes);
  }

  // memmove, for buffers that may be empty (and then null).
  static void Copy(void* to, const void* from, int64_t bytes) {
    if (bytes > 0) std::memmove(to, from, static_cast<size_t>(bytes));
  }

  static std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
    std::vector<int64_t> off(counts.size() + 1, 0);
    for (size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i];
    return off;
  }

  // Phase 0 of every kind.
  static void Post(Job& job, std::vector<std::vector<std::byte>>& pool) {
    Request& r = job.req;
    const int n = job.group->size(), me = job.group->rank();
    const int64_t es = TypeSize(r.type);
    auto at = [&](const void* base, int64_t elements) {
      return const_cast<std::byte*>(static_cast<const std::byte*>(base) + elements * es);
    };
    switch (r.kind) {
      case Request::Kind::kAllReduce:
        r.counts = AllReduceSegments(r.count, n);
        [[fallthrough]];
      case Request::Kind::kReduceScatter: {
        job.offsets = Offsets(r.counts);
        const int64_t mine = r.counts[me];
        // A slot per other rank (rank p's at p, or p - 1 after this rank).
        job.staging = TakeStaging(pool, static_cast<size_t>(mine * es * (n - 1)));
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          Message(job, true, job.staging.data() + (p - (p > me)) * mine * es, mine * es, p);
          Message(job, false, at(r.send, job.offsets[p]), r.counts[p] * es, p);
        }
        break;
      }
      case Request::Kind::kAllGather: {
        job.offsets = Offsets(r.counts);
        void* own = at(r.recv, job.offsets[me]);
        if (own != r.send) Copy(own, r.send, r.counts[me] * es);
        PostGather(job);
        break;
      }
      case Request::Kind::kBroadcast:
        if (me == r.peer) {
          for (int p = 0; p < n; ++p) {
            if (p != me) Message(job, false, r.recv, r.count * es, p);
          }
        } else {
          Message(job, true, r.recv, r.count * es, r.peer);
        }
        break;
      case Request::Kind::kAllToAll: {
        const auto send_off = Offsets(r.counts), recv_off = Offsets(r.recv_counts);
        CHECK_EQ(r.counts[me], r.recv_counts[me]) << "all-to-all on " << job.group->name()
                                                  << ": this rank's own segment sizes differ";
        Copy(at(r.recv, recv_off[me]), at(r.send, send_off[me]), r.counts[me] * es);
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          Message(job, true, at(r.recv, recv_off[p]), r.recv_counts[p] * es, p);
          Message(job, false, at(r.send, send_off[p]), r.counts[p] * es, p);
        }
        break;
      }
      case Request::Kind::kSend:
        Message(job, false, const_cast<void*>(r.send), r.count * es, r.peer);
        break;
      case Request::Kind::kRecv:
        Message(job, true, r.recv, r.count * es, r.peer);
        break;
      case Request::Kind::kBarrier:
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          Message(job, true, nullptr, 0, p);
          Message(job, false, nullptr, 0, p);
        }
        break;
    }
  }

  // Sends this rank's segment of r.recv to every rank and receives theirs.
  static void PostGather(Job& job) {
    const Request& r = job.req;
    const int n = job.group->size(), me = job.group->rank();
    const int64_t es = TypeSize(r.type);
    std::byte* base = static_cast<std::byte*>(r.recv);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      Message(job, true, base + job.offsets[p] * es, r.counts[p] * es, p);
      Message(job, false, base + job.offsets[me] * es, r.counts[me] * es, p);
    }
  }

  // The phase's messages are done: the local work, then the next phase.
  // Returns true when the job is complete.
  static bool Advance(Job& job) {
    job.pending.clear();
    job.pending_peer.clear();
    job.pending_recv.clear();
    job.pending_bytes.clear();
    Request& r = job.req;
    if (job.phase > 0 || (r.kind != Request::Kind::kAllReduce &&
                          r.kind != Request::Kind::kReduceScatter)) {
      return true;
    }
    // Fold this rank's segment: what it holds already (accumulate), then its
    // own values and the received ones in rank order.
    const int n = job.group->size(), me = job.group->rank();
    const int64_t es = TypeSize(r.type), mine = r.counts[me];
    void* out = r.kind == Request::Kind::kAllReduce
                    ? static_cast<std::byte*>(r.recv) + job.offsets[me] * es
                    : r.recv;
    std::vector<const void*> inputs;
    if (r.accumulate) inputs.push_back(out);
    for (int p = 0; p < n; ++p) {
      inputs.push_back(p == me ? static_cast<const std::byte*>(r.send) + job.offsets[me] * es
                               : static_cast<const void*>(job.staging.data() + (p - (p > me)) * mine * es));
    }
    FoldInOrder(r.type, r.op, inputs, out, mine);
    if (r.kind == Request::Kind::kReduceScatter) return true;
    job.phase = 1;  // all-reduce: gather the folded segments
    PostGather(job);
    return false;
  }

  int world_rank_;
  std::atomic<double> timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::vector<std::byte>> staging_pool_;  // communication thread only
  std::thread thread_;
};

MpiGroup::~MpiGroup() {
  if (g_runtime != nullptr && comm_ != MPI_COMM_WORLD) {
    MPI_Comm comm = comm_;
    g_runtime->RunSync([&] { MPI_Comm_free(&comm); });
  }
}

std::unique_ptr<Group> MpiGroup::Split(int color, int key, const std::string& name) {
  MPI_Comm sub = MPI_COMM_NULL;
  int rank = 0, size = 0;
  std::vector<int> world(static_cast<size_t>(this->size()));
  g_runtime->RunSync([&] {
    MPI_Comm_split(comm_, color, key, &sub);
    MPI_Comm_rank(sub, &rank);
    MPI_Comm_size(sub, &size);
    world.resize(size);
    int me = world_ranks()[this->rank()];
    MPI_Allgather(&me, 1, MPI_INT, world.data(), 1, MPI_INT, sub);
  });
  return std::make_unique<MpiGroup>(sub, rank, size, this->name() + "/" + name, std::move(world));
}

Handle MpiGroup::Start(Request request) {
  auto job = std::make_unique<Job>();
  const bool user = request.kind == Request::Kind::kSend || request.kind == Request::Kind::kRecv;
  if (user) {
    CHECK(request.tag >= 0 && request.tag < kUserTagLimit)
        << "send/recv tag " << request.tag << " outside [0, " << kUserTagLimit << ")";
    job->tag = request.tag;
  } else {
    job->sequence = sequence_++;
    job->tag = kUserTagLimit + static_cast<int>(job->sequence % kTagSpace);
  }
  job->req = std::move(request);
  job->comm = comm_;
  job->group = this;
  job->state = std::make_shared<Handle::State>();
  Handle handle(job->state);
  if (size() == 1) {  // nothing to send: the local copies
    LocalGroup(name()).Start(job->req).Wait();
    job->state->Complete();
    return handle;
  }
  g_runtime->Submit(std::move(job));
  return handle;
}

std::mutex g_world_mu;
std::shared_ptr<Group> g_world;

}  // namespace

bool UnderMpiLauncher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

Result<std::shared_ptr<Group>> InitWorld(const WorldOptions& options) {
  std::lock_guard<std::mutex> lock(g_world_mu);
  if (g_world) {
    if (g_runtime != nullptr) g_runtime->set_timeout(options.timeout_s);
    return g_world;
  }
  if (!UnderMpiLauncher()) {
    g_world = std::make_shared<LocalGroup>("world");
    return g_world;
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    return Internal("MPI_Init_thread failed");
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return Internal(fmt::format(
        "this MPI library gives thread level {} but anvil needs MPI_THREAD_MULTIPLE (collectives "
        "run on a communication thread; a failing CHECK on another thread aborts the job)",
        provided));
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int* tag_ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  if (!flag || *tag_ub < kUserTagLimit + kTagSpace) {
    return Internal("this MPI library's MPI_TAG_UB is too small for anvil's tags");
  }
  SetCheckRank(rank);
  g_world_rank.store(rank);
  SetCheckFailureHandler(&MpiCheckHandler);
  std::vector<int> world(size);
  for (int i = 0; i < size; ++i) world[i] = i;
  g_runtime = new MpiRuntime(rank, options.timeout_s);
  g_world = std::make_shared<MpiGroup>(MPI_COMM_WORLD, rank, size, "world", std::move(world));
  return g_world;
}

std::unique_ptr<Group> MakeLocalGroup(const std::string& name) {
  return std::make_unique<LocalGroup>(name);
}

void FinalizeWorld() {
  std::lock_guard<std::mutex> lock(g_world_mu);
  if (g_runtime == nullptr) return;
  g_world.reset();
  g_runtime->Stop();
  delete g_runtime;
  g_runtime = nullptr;
  SetCheckFailureHandler(nullptr);
  MPI_Finalize();
}

void SetDiagnosticStep(int64_t step) { g_step.store(step); }

void AbortWorld(int code) {
  EndChildGroups();
  if (g_runtime != nullptr) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void SetWatchdogTimeout(double seconds) {
  std::lock_guard<std::mutex> lock(g_world_mu);
  if (g_runtime != nullptr) g_runtime->set_timeout(seconds);
}

}  // namespace anvil::comm
