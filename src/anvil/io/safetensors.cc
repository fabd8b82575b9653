// safetensors writing and validated reading.
#include "anvil/io/safetensors.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "anvil/core/file_util.h"

namespace anvil::io {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t NumElements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// Whether the elements of `shape` (extents >= 0) number more than `limit`,
// without overflowing on the way.
bool MoreElementsThan(const std::vector<int64_t>& shape, uint64_t limit) {
  for (int64_t d : shape) {
    if (d == 0) return false;
  }
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (static_cast<uint64_t>(d) > limit / n) return true;
    n *= static_cast<uint64_t>(d);
  }
  return n > limit;
}

// A JSON array of integers in [0, max]. nlohmann's get<> would truncate
// floats (undefined behaviour when out of range) and wrap negative numbers,
// so each element is checked first.
bool GetCounts(const nlohmann::json& j, uint64_t max, std::vector<uint64_t>* out) {
  if (!j.is_array()) return false;
  out->clear();
  for (const nlohmann::json& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max) return false;
    out->push_back(v.get<uint64_t>());
  }
  return true;
}

}  // namespace

Result<std::string> SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::string("F32");
    case DType::kBF16: return std::string("BF16");
    case DType::kF16: return std::string("F16");
    case DType::kE4M3: return std::string("F8_E4M3");
    case DType::kE5M2: return std::string("F8_E5M2");
    case DType::kE8M0: return std::string("F8_E8M0");
    case DType::kI8: return std::string("I8");
    case DType::kI4: break;
  }
  return InvalidArgument(fmt::format("dtype {} has no safetensors name", DTypeName(dtype)));
}

Result<DType> ParseSafetensorsDType(const std::string& name) {
  for (DType dtype : kAllDTypes) {
    Result<std::string> n = SafetensorsDTypeName(dtype);
    if (n.ok() && *n == name) return dtype;
  }
  return InvalidArgument(fmt::format("unsupported safetensors dtype '{}'", name));
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    if (!names.insert(t.name).second) {
      return InvalidArgument(fmt::format("{}: tensor name '{}' appears twice", path, t.name));
    }
    ASSIGN_OR_RETURN(std::string dtype_name, SafetensorsDTypeName(t.dtype));
    const uint64_t bytes = DTypeBytes(t.dtype, static_cast<int64_t>(NumElements(t.shape)));
    header[t.name] = {{"dtype", dtype_name}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.resize((json.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned
  const uint64_t header_size = json.size();

  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  unsigned char size_le[8];
  for (int i = 0; i < 8; ++i) size_le[i] = static_cast<unsigned char>(header_size >> (8 * i));
  RETURN_IF_ERROR(file.Append(size_le, 8));
  RETURN_IF_ERROR(file.Append(json.data(), json.size()));
  for (const TensorRef& t : tensors) {
    RETURN_IF_ERROR(
        file.Append(t.data, DTypeBytes(t.dtype, static_cast<int64_t>(NumElements(t.shape)))));
  }
  return file.Commit();
}

namespace {

// The 8-byte little-endian header length.
uint64_t HeaderSize(const unsigned char* le) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{le[i]} << (8 * i);
  return n;
}

Status NotSafetensors(const std::string& path, uint64_t bytes) {
  return DataLoss(
      fmt::format("{}: not a safetensors file: {} bytes, shorter than the 8-byte "
                  "header length",
                  path, bytes));
}

Status HeaderPastEnd(const std::string& path, uint64_t header_size, uint64_t bytes) {
  return DataLoss(fmt::format("{}: header length {} exceeds the file size {} (truncated?)", path,
                              header_size, bytes));
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Read(const std::string& path) {
  // The header, then the data section straight into aligned memory: not the
  // whole file into a buffer first, which for a checkpoint's hundreds of MB
  // cost a second copy and a fresh page (a fault each) per 4 KiB.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{}: no such file", path));
    return IoError(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return IoError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) return IoError(fmt::format("{}: is a folder, not a file", path));
  const auto size = static_cast<uint64_t>(st.st_size);
  auto read_at = [&](void* out, uint64_t bytes, uint64_t offset) -> Status {
    auto* p = static_cast<char*>(out);
    for (uint64_t done = 0; done < bytes;) {
      const ssize_t r = ::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return IoError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
      if (r == 0) return DataLoss(fmt::format("{}: ended while read (changed meanwhile?)", path));
      done += static_cast<uint64_t>(r);
    }
    return Status::Ok();
  };
  if (size < 8) return NotSafetensors(path, size);
  unsigned char le[8];
  RETURN_IF_ERROR(read_at(le, 8, 0));
  const uint64_t header_size = HeaderSize(le);
  if (header_size > size - 8) return HeaderPastEnd(path, header_size, size);
  std::string header(header_size, '\0');
  RETURN_IF_ERROR(read_at(header.data(), header_size, 8));
  AlignedBuffer data(size - 8 - header_size);
  RETURN_IF_ERROR(read_at(data.data(), data.size(), 8 + header_size));
  return FromParts(header, std::move(data), path);
}

Result<SafetensorsFile> SafetensorsFile::Parse(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 8) return NotSafetensors(path, bytes.size());
  const uint64_t header_size = HeaderSize(reinterpret_cast<const unsigned char*>(bytes.data()));
  if (header_size > bytes.size() - 8) return HeaderPastEnd(path, header_size, bytes.size());
  AlignedBuffer data(bytes.size() - 8 - header_size);
  if (data.size() > 0) std::memcpy(data.data(), bytes.data() + 8 + header_size, data.size());
  return FromParts(bytes.substr(8, header_size), std::move(data), path);
}

Result<SafetensorsFile> SafetensorsFile::FromParts(std::string_view header_text, AlignedBuffer data,
                                                   const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.data_ = std::move(data);
  const uint64_t data_size = f.data_.size();
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text.begin(), header_text.end());
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: header is not valid JSON: {}", path, e.what()));
  }
  if (!header.is_object()) return DataLoss(fmt::format("{}: header is not a JSON object", path));
  try {
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        if (!value.is_object()) {
          return DataLoss(fmt::format("{}: __metadata__ is not an object", path));
        }
        for (const auto& [k, v] : value.items()) f.metadata_[k] = v.get<std::string>();
        continue;
      }
      Entry e;
      Result<DType> dtype = ParseSafetensorsDType(value.at("dtype").get<std::string>());
      if (!dtype.ok()) return dtype.status().WithContext(path + ": tensor '" + name + "'");
      e.dtype = *dtype;
      std::vector<uint64_t> extents;
      if (!GetCounts(value.at("shape"), INT64_MAX, &extents)) {
        return DataLoss(fmt::format("{}: tensor '{}': the shape is not a list of integer "
                                    "extents >= 0", path, name));
      }
      e.shape.assign(extents.begin(), extents.end());
      std::vector<uint64_t> offsets;
      if (!GetCounts(value.at("data_offsets"), UINT64_MAX, &offsets) || offsets.size() != 2 ||
          offsets[0] > offsets[1] || offsets[1] > data_size) {
        return DataLoss(fmt::format("{}: tensor '{}' has data_offsets outside the {} data bytes "
                                    "(truncated file?)", path, name, data_size));
      }
      e.begin = offsets[0];
      e.end = offsets[1];
      // Bounded before DTypeBytes: a byte count must not overflow (at least 4
      // bits per element, so never more than 2 elements per data byte).
      if (MoreElementsThan(e.shape, 2 * data_size)) {
        return DataLoss(fmt::format("{}: tensor '{}' {}{} has more elements than the {} data "
                                    "bytes can hold", path, name, DTypeName(e.dtype),
                                    ShapeString(e.shape), data_size));
      }
      const uint64_t expected = DTypeBytes(e.dtype, static_cast<int64_t>(NumElements(e.shape)));
      if (e.end - e.begin != expected) {
        return DataLoss(fmt::format("{}: tensor '{}' {}{} needs {} bytes but spans {}", path, name,
                                    DTypeName(e.dtype), ShapeString(e.shape), expected,
                                    e.end - e.begin));
      }
      f.entries_[name] = std::move(e);
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed header entry: {}", path, e.what()));
  }
  return f;
}

Result<const void*> SafetensorsFile::Get(const std::string& name, DType dtype,
                                         const std::vector<int64_t>& shape) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return NotFound(fmt::format("{}: no tensor named '{}'", path_, name));
  const Entry& e = it->second;
  if (e.dtype != dtype || e.shape != shape) {
    return InvalidArgument(fmt::format("{}: tensor '{}' is {}{}, expected {}{}", path_, name,
                                       DTypeName(e.dtype), ShapeString(e.shape), DTypeName(dtype),
                                       ShapeString(shape)));
  }
  return static_cast<const void*>(data_.data() + e.begin);
}

}  // namespace anvil::io
