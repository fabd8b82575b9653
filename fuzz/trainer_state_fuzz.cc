// libFuzzer target: trainer_state.json (ParseTrainerState, what
// Trainer::LoadCheckpoint runs on the file's text before comparing it with the
// run). A state it accepts holds counts a resume can use.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anvil/core/check.h"
#include "anvil/train/trainer_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const anvil::Result<anvil::train::TrainerState> s =
      anvil::train::ParseTrainerState(text, "fuzz/trainer_state.json");
  if (!s.ok()) return 0;
  CHECK_GE(s->step, 0);
  CHECK_GE(s->tokens_seen, 0);
  CHECK_GE(s->optimizer_step, 0);
  CHECK_LE(s->loader.epoch, UINT32_MAX);
  return 0;
}
