// libFuzzer target: the checkpoint manifest (ParseCheckpointManifest, what
// OpenCheckpoint runs on manifest.json before checking the files). A manifest
// it accepts names only plain files inside the checkpoint folder.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anvil/core/check.h"
#include "anvil/io/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const anvil::Result<anvil::io::CheckpointManifest> m =
      anvil::io::ParseCheckpointManifest(text, "fuzz/manifest.json");
  if (!m.ok()) return 0;
  CHECK_GE(m->step, 0);
  for (const anvil::io::CheckpointManifest::File& f : m->files) {
    CHECK(!f.name.empty() && f.name != "." && f.name != "..");
    CHECK_EQ(f.name.find('/'), std::string::npos) << f.name;
    CHECK_EQ(f.name.find('\0'), std::string::npos);
  }
  return 0;
}
