// The trace buffer and its Chrome JSON output (see trace.h).
#include "anvil/profile/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "anvil/core/file_util.h"

namespace anvil::profile {
namespace {

struct Buffer {
  std::unique_ptr<TraceEvent[]> events;
  size_t capacity = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> dropped{0};
  int64_t origin_ns = 0;
};
Buffer g_buffer;
std::atomic<uint32_t> g_next_tid{0};

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t ThreadId() {
  thread_local const uint32_t id = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void AppendEscaped(std::string& out, const char* s) {
  for (; *s != '\0'; ++s) {
    const char c = *s;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
}

}  // namespace

namespace trace_detail {

int64_t NowNs() { return SteadyNs() - g_buffer.origin_ns; }

void Record(const char* name, int64_t begin_ns, int64_t end_ns, int64_t bytes, const char* group) {
  const size_t slot = g_buffer.next.fetch_add(1, std::memory_order_relaxed);
  if (slot >= g_buffer.capacity) {
    g_buffer.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_buffer.events[slot] = TraceEvent{name, begin_ns, end_ns - begin_ns, ThreadId(), bytes, group};
}

}  // namespace trace_detail

void Tracer::Start(size_t capacity) {
  trace_detail::g_enabled.store(false, std::memory_order_relaxed);
  if (g_buffer.capacity != capacity) {
    g_buffer.events = std::make_unique<TraceEvent[]>(capacity);  // touched once, here
    g_buffer.capacity = capacity;
  }
  g_buffer.next.store(0);
  g_buffer.dropped.store(0);
  g_buffer.origin_ns = SteadyNs();
  trace_detail::g_enabled.store(true, std::memory_order_release);
}

void Tracer::Stop() { trace_detail::g_enabled.store(false, std::memory_order_release); }

std::vector<TraceEvent> Tracer::Events() {
  const size_t n = std::min(g_buffer.next.load(std::memory_order_acquire), g_buffer.capacity);
  return std::vector<TraceEvent>(g_buffer.events.get(), g_buffer.events.get() + n);
}

size_t Tracer::dropped() { return g_buffer.dropped.load(); }

std::string Tracer::ChromeJson(int pid, const std::string& process) {
  const std::vector<TraceEvent> events = Events();
  std::string out = "{\"traceEvents\":[\n";
  uint32_t max_tid = 0;
  char buf[160];
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    max_tid = std::max(max_tid, e.tid);
    out += "{\"name\":\"";
    AppendEscaped(out, e.name);
    std::snprintf(buf, sizeof buf, "\",\"ph\":\"X\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f",
                  pid, e.tid, e.begin_ns * 1e-3, e.dur_ns * 1e-3);
    out += buf;
    if (e.group != nullptr) {
      std::snprintf(buf, sizeof buf, ",\"args\":{\"bytes\":%lld,\"group\":\"",
                    static_cast<long long>(e.bytes));
      out += buf;
      AppendEscaped(out, e.group);
      out += "\"}";
    }
    out += "},\n";
  }
  for (uint32_t t = 0; t <= max_tid && !events.empty(); ++t) {
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,"
                  "\"args\":{\"name\":\"thread %u\"}},\n",
                  pid, t, t);
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"",
                pid);
  out += buf;
  AppendEscaped(out, process.c_str());
  std::snprintf(buf, sizeof buf, " (%zu events dropped)\"}}\n", dropped());
  out += buf;
  out += "]}\n";
  return out;
}

Status Tracer::WriteChromeJson(const std::string& path, int pid, const std::string& process) {
  return WriteFileAtomic(path, ChromeJson(pid, process));
}

}  // namespace anvil::profile
