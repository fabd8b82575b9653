// Tests of trace zones: nothing recorded when off; events from several
// threads when on; overflow counted; the Chrome JSON has the events.
#include "anvil/profile/trace.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace anvil::profile {
namespace {

TEST(Trace, OffRecordsNothing) {
  Tracer::Start(16);
  Tracer::Stop();
  { ANVIL_TRACE_ZONE("off"); }
  EXPECT_TRUE(Tracer::Events().empty());
}

TEST(Trace, RecordsNestedZonesFromThreads) {
  Tracer::Start(1024);
  {
    ANVIL_TRACE_ZONE("outer");
    { ANVIL_TRACE_ZONE("inner"); }
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 10; ++i) ANVIL_TRACE_ZONE("worker");
    });
  }
  for (std::thread& t : threads) t.join();
  Tracer::Stop();
  const std::vector<TraceEvent> events = Tracer::Events();
  ASSERT_EQ(events.size(), 42u);
  EXPECT_STREQ(events[0].name, "inner");  // closes first
  EXPECT_STREQ(events[1].name, "outer");
  EXPECT_LE(events[1].begin_ns, events[0].begin_ns);
  EXPECT_GE(events[1].dur_ns, events[0].dur_ns);
  const std::string json = Tracer::ChromeJson();
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"name\":\"worker\",\"ph\":\"X\""), std::string::npos);
}

TEST(Trace, OverflowIsCounted) {
  Tracer::Start(3);
  for (int i = 0; i < 5; ++i) ANVIL_TRACE_ZONE("z");
  Tracer::Stop();
  EXPECT_EQ(Tracer::Events().size(), 3u);
  EXPECT_EQ(Tracer::dropped(), 2u);
}

}  // namespace
}  // namespace anvil::profile
