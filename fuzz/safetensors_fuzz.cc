// libFuzzer target: the safetensors reader (SafetensorsFile::Parse, what
// SafetensorsFile::Read runs on a file's bytes). A file it accepts must hand
// out every tensor it lists, inside the data it holds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anvil/core/check.h"
#include "anvil/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const anvil::Result<anvil::io::SafetensorsFile> file =
      anvil::io::SafetensorsFile::Parse(bytes, "fuzz.safetensors");
  if (!file.ok()) return 0;
  for (const auto& [name, e] : file->entries()) {
    const anvil::Result<const void*> p = file->Get(name, e.dtype, e.shape);
    CHECK(p.ok()) << p.status().ToString();
    CHECK_LE(e.begin, e.end);
    // Touch every byte: AddressSanitizer catches a range past the buffer.
    const auto* b = static_cast<const unsigned char*>(*p);
    unsigned sum = 0;
    for (uint64_t i = 0; i < e.end - e.begin; ++i) sum += b[i];
    volatile unsigned sink = sum;
    (void)sink;
  }
  return 0;
}
