// libFuzzer target: a `task.name = "pairs"` data file, JSON lines of
// {"prompt": ..., "response": ...} (ReadProblemPairs, which reads a path: the
// input goes through one file in $TMPDIR, which scripts/run_fuzz.sh points at
// its temporary folder, removed at exit). Pairs it accepts have a prompt and
// an answer, and one is held out.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "anvil/core/check.h"
#include "anvil/rl/reward.h"
#include "anvil/rl/tasks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/anvil-pairs-fuzz." +
           std::to_string(getpid()) + ".jsonl";
  }();
  // Registered after `path` is built, so it runs before path's destructor.
  [[maybe_unused]] static const bool removed_at_exit =
      std::atexit([] { std::remove(path.c_str()); }) == 0;
  FILE* f = std::fopen(path.c_str(), "wb");
  CHECK(f != nullptr) << path;
  CHECK_EQ(std::fwrite(data, 1, size, f), size);
  CHECK_EQ(std::fclose(f), 0);
  const anvil::Result<anvil::rl::ProblemPairs> pairs = anvil::rl::ReadProblemPairs(path, 1);
  if (!pairs.ok()) return 0;
  CHECK_EQ(pairs->held_out.size(), size_t{1});
  CHECK(!pairs->train.empty());
  for (const auto* part : {&pairs->train, &pairs->held_out}) {
    for (const anvil::rl::Problem& p : *part) {
      CHECK(!p.prompt.empty());
      CHECK(!anvil::rl::AnswerOf(p.answer).empty());
    }
  }
  return 0;
}
