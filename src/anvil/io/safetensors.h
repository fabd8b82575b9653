// safetensors files (the Hugging Face format): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian tensor bytes. Written atomically; read with every
// offset and size validated, errors naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/dtype.h"
#include "anvil/core/status.h"

namespace anvil::io {

// One tensor to write: the bytes are borrowed until Write() returns.
struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes `tensors` (in the given order) and string metadata to `path`
// atomically (temp file, fsync, rename). Names must be unique.
Status WriteSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// A loaded file: tensors are views into one buffer owned by this object.
class SafetensorsFile {
 public:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // byte range within the data section
    uint64_t end = 0;
  };

  static Result<SafetensorsFile> Read(const std::string& path);
  // Parses the bytes of a whole file (what Read() does after reading it);
  // `path` names the source in errors. The data section is copied.
  static Result<SafetensorsFile> Parse(std::string_view bytes, const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  bool Contains(const std::string& name) const { return entries_.count(name) != 0; }

  // The tensor's bytes, checked against the expected dtype and shape; the
  // error names the file, the tensor, and what differs.
  Result<const void*> Get(const std::string& name, DType dtype,
                          const std::vector<int64_t>& shape) const;

 private:
  // A file of `header_text` (the JSON header) and `data` (the data
  // section), validated.
  static Result<SafetensorsFile> FromParts(std::string_view header_text, AlignedBuffer data,
                                           const std::string& path);

  std::string path_;
  // The data section, copied to aligned memory: the header length need not be
  // a multiple of 8, and typed reads of the tensors need aligned addresses.
  AlignedBuffer data_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, Entry> entries_;
};

// "F32", "BF16", ... as safetensors spells them; an error for dtypes it lacks.
Result<std::string> SafetensorsDTypeName(DType dtype);
Result<DType> ParseSafetensorsDType(const std::string& name);

}  // namespace anvil::io
