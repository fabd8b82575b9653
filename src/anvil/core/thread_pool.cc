// Thread pool: futex-parked workers, generation-counter job publication.
#include "anvil/core/thread_pool.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "anvil/core/check.h"
#include "anvil/core/intrinsics.h"

namespace anvil {
namespace {

// Set while a thread executes a pool job, so nested calls run inline.
thread_local bool t_in_job = false;

// Spin this many pause instructions (a few microseconds) before sleeping: long
// enough to catch back-to-back kernel launches, short enough not to steal a
// core from the thread doing real work.
constexpr int kSpinIterations = 2000;

template <typename T>
void SpinThenWait(const std::atomic<T>& value, T old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (value.load(std::memory_order_acquire) != old) return;
    _mm_pause();
  }
  while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
}

}  // namespace

Result<int> ParseThreadCount(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || n < 1 || n > 1024) {
    return InvalidArgument(std::string("ANVIL_THREADS must be an integer in [1, 1024], got '") +
                           text + "'");
  }
  return static_cast<int>(n);
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("ANVIL_THREADS")) {
    const Result<int> n = ParseThreadCount(env);
    CHECK(n.ok()) << n.status().ToString();
    return *n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::pair<int64_t, int64_t> ThreadPool::StaticRange(int64_t n, int parts, int t) {
  const int64_t base = n / parts;
  const int64_t extra = n % parts;
  const int64_t begin = t * base + std::min<int64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

ThreadPool::ThreadPool(int num_threads)
    : size_(num_threads == 0 ? DefaultThreadCount() : num_threads) {
  CHECK_GT(size_, 0);
  workers_.reserve(size_ - 1);
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::Dispatch(JobFn fn, void* arg) {
  if (size_ == 1 || t_in_job) {
    for (int t = 0; t < size_; ++t) fn(arg, t);
    return;
  }
  job_fn_ = fn;
  job_arg_ = arg;
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_fn_/job_arg_
  generation_.notify_all();

  t_in_job = true;
  fn(arg, 0);
  t_in_job = false;

  for (int left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire)) {
    SpinThenWait(pending_, left);
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    SpinThenWait(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_) return;
    t_in_job = true;
    job_fn_(job_arg_, index);
    t_in_job = false;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace anvil
