// Checkpoint folders: atomic publish, manifest checksums, latest pointer,
// keep-last-N (see checkpoint.h).
#include "anvil/io/checkpoint.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "anvil/core/file_util.h"

namespace anvil::io {
namespace fs = std::filesystem;
namespace {

struct FileSum {
  uint64_t bytes = 0;
  uint64_t fnv1a64 = kFnv1a64Offset;
};

// Size and checksum of a file, read in 1 MiB pieces; fsyncs it when `sync`.
Result<FileSum> SumFile(const std::string& path, bool sync) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? NotFound(fmt::format("{}: missing", path))
                           : IoError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  FileSum sum;
  std::vector<char> buf(size_t{1} << 20);
  while (true) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const Status s = IoError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
      ::close(fd);
      return s;
    }
    if (got == 0) break;
    sum.fnv1a64 = Fnv1a64(buf.data(), static_cast<size_t>(got), sum.fnv1a64);
    sum.bytes += static_cast<uint64_t>(got);
  }
  if (sync && ::fsync(fd) != 0) {
    const Status s = IoError(fmt::format("{}: fsync failed: {}", path, std::strerror(errno)));
    ::close(fd);
    return s;
  }
  ::close(fd);
  return sum;
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(fmt::format("{}: cannot open folder: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return IoError(fmt::format("{}: fsync of folder failed: {}", dir, std::strerror(errno)));
  return Status::Ok();
}

Status RemoveAll(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) return IoError(fmt::format("{}: cannot remove: {}", p.string(), ec.message()));
  return Status::Ok();
}

// The step of a "step_<N>" name, or -1.
int64_t StepOfName(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (int64_t{1} << 55)) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string FormatHex(uint64_t v) { return fmt::format("{:016x}", v); }

// An integer JSON value as T, or nullopt. nlohmann's get<> would truncate a
// float (undefined behaviour when out of range) and wrap a negative number.
template <typename T>
std::optional<T> GetInteger(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(v);
  } else if (j.is_number_integer() && std::is_signed_v<T>) {
    return static_cast<T>(j.get<int64_t>());
  }
  return std::nullopt;
}

}  // namespace

std::string CheckpointDirName(int64_t step) { return fmt::format("step_{}", step); }

std::string CheckpointTempDir(const std::string& run_dir, int64_t step) {
  return run_dir + "/" + CheckpointDirName(step) + ".tmp";
}

CheckpointWriter::CheckpointWriter(std::string run_dir, int64_t step)
    : run_dir_(std::move(run_dir)),
      temp_dir_(CheckpointTempDir(run_dir_, step)),
      final_dir_(run_dir_ + "/" + CheckpointDirName(step)),
      step_(step) {}

Result<CheckpointWriter> CheckpointWriter::Begin(const std::string& run_dir, int64_t step) {
  CHECK_GE(step, 0);
  CheckpointWriter w(run_dir, step);
  RETURN_IF_ERROR(RemoveAll(w.temp_dir_));
  RETURN_IF_ERROR(MakeDirectories(w.temp_dir_));
  return w;
}

Result<std::string> CheckpointWriter::Commit() {
  CHECK(!committed_) << "checkpoint committed twice";
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(temp_dir_, ec)) {
    if (!e.is_regular_file()) {
      return InvalidArgument(fmt::format("{}: only plain files belong in a checkpoint",
                                         e.path().string()));
    }
    const std::string name = e.path().filename().string();
    if (name != kManifestFile) names.push_back(name);
  }
  if (ec) return IoError(fmt::format("{}: cannot list: {}", temp_dir_, ec.message()));
  std::sort(names.begin(), names.end());

  nlohmann::ordered_json manifest;
  manifest["format"] = "anvil-checkpoint";
  manifest["version"] = 1;
  manifest["step"] = step_;
  manifest["checksum"] = "fnv1a64";
  manifest["files"] = nlohmann::ordered_json::array();
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(const FileSum sum, SumFile(Path(name), /*sync=*/true));
    manifest["files"].push_back({{"name", name}, {"bytes", sum.bytes}, {"fnv1a64", FormatHex(sum.fnv1a64)}});
  }
  RETURN_IF_ERROR(WriteFileAtomic(Path(kManifestFile), manifest.dump(2) + "\n"));
  RETURN_IF_ERROR(SyncDir(temp_dir_));

  // Publish: an existing folder of this step moves aside first, so the name
  // always holds a complete checkpoint or none.
  const std::string aside = final_dir_ + ".replaced";
  if (fs::exists(final_dir_)) {
    RETURN_IF_ERROR(RemoveAll(aside));
    fs::rename(final_dir_, aside, ec);
    if (ec) return IoError(fmt::format("{}: cannot move aside: {}", final_dir_, ec.message()));
  }
  fs::rename(temp_dir_, final_dir_, ec);
  if (ec) {
    return IoError(fmt::format("rename {} -> {}: {}", temp_dir_, final_dir_, ec.message()));
  }
  RETURN_IF_ERROR(SyncDir(run_dir_));
  RETURN_IF_ERROR(WriteFileAtomic(run_dir_ + "/" + kLatestFile, CheckpointDirName(step_) + "\n"));
  RETURN_IF_ERROR(RemoveAll(aside));
  committed_ = true;
  return final_dir_;
}

Result<CheckpointInfo> OpenCheckpoint(const std::string& path, CheckpointRead read) {
  std::string dir = path;
  while (!dir.empty() && dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  auto follow_latest = [&](const std::string& latest_file) -> Status {
    ASSIGN_OR_RETURN(std::string text, ReadFile(latest_file));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (StepOfName(text) < 0) {
      return DataLoss(fmt::format("{}: does not name a checkpoint folder (step_<N>): \"{}\"",
                                  latest_file, text));
    }
    dir = fs::path(latest_file).parent_path().string() + "/" + text;
    if (fs::path(latest_file).parent_path().empty()) dir = text;
    // A checkpoint written again over itself (Commit) moves the old folder
    // aside first: a crash between the two renames leaves it there, whole.
    if (!fs::exists(dir, ec) && fs::is_directory(dir + ".replaced", ec)) dir += ".replaced";
    return Status::Ok();
  };
  if (fs::is_regular_file(dir, ec) && fs::path(dir).filename() == kLatestFile) {
    RETURN_IF_ERROR(follow_latest(dir));
  } else if (fs::is_directory(dir, ec) && !fs::exists(dir + "/" + kManifestFile, ec)) {
    if (!fs::exists(dir + "/" + kLatestFile, ec)) {
      return NotFound(fmt::format(
          "{}: neither a checkpoint (no {}) nor a run folder with checkpoints (no {})", dir,
          kManifestFile, kLatestFile));
    }
    RETURN_IF_ERROR(follow_latest(dir + "/" + kLatestFile));
  } else if (!fs::exists(dir, ec)) {
    return NotFound(fmt::format("{}: no such checkpoint or run folder", dir));
  }

  const std::string manifest_path = dir + "/" + kManifestFile;
  ASSIGN_OR_RETURN(const std::string text, ReadFile(manifest_path));
  ASSIGN_OR_RETURN(const CheckpointManifest manifest, ParseCheckpointManifest(text, manifest_path));
  for (const CheckpointManifest::File& f : manifest.files) {
    const std::string file = dir + "/" + f.name;
    if (read == CheckpointRead::kModel && f.name.find("optimizer") != std::string::npos) {
      const uint64_t bytes = fs::file_size(file, ec);
      if (ec) return NotFound(fmt::format("{}: missing ({})", file, ec.message()));
      if (bytes != f.bytes) {
        return DataLoss(fmt::format("{}: {} bytes, the manifest says {} (truncated or replaced)",
                                    file, bytes, f.bytes));
      }
      continue;  // optimizer state: its checksum is a resume's to verify
    }
    ASSIGN_OR_RETURN(const FileSum sum, SumFile(file, /*sync=*/false));
    if (sum.bytes != f.bytes) {
      return DataLoss(fmt::format("{}: {} bytes, the manifest says {} (truncated or replaced)",
                                  file, sum.bytes, f.bytes));
    }
    if (FormatHex(sum.fnv1a64) != f.fnv1a64) {
      return DataLoss(fmt::format("{}: checksum {} does not match the manifest's {} (corrupt)",
                                  file, FormatHex(sum.fnv1a64), f.fnv1a64));
    }
  }
  return CheckpointInfo{dir, manifest.step};
}

Result<CheckpointManifest> ParseCheckpointManifest(std::string_view text, const std::string& path) {
  CheckpointManifest manifest;
  try {
    const nlohmann::json m = nlohmann::json::parse(text);
    if (!m.is_object() || m.value("format", "") != "anvil-checkpoint") {
      return DataLoss(fmt::format("{}: not an anvil checkpoint manifest", path));
    }
    const std::optional<int64_t> step = GetInteger<int64_t>(m.at("step"));
    if (!step || *step < 0) {
      return DataLoss(fmt::format("{}: malformed manifest: step is not an integer >= 0", path));
    }
    manifest.step = *step;
    if (!m.at("files").is_array()) {
      return DataLoss(fmt::format("{}: malformed manifest: files is not a list", path));
    }
    for (const nlohmann::json& f : m.at("files")) {
      CheckpointManifest::File file;
      file.name = f.at("name").get<std::string>();
      // The files of this folder only: no path that leads elsewhere.
      if (file.name.empty() || file.name == "." || file.name == ".." ||
          file.name.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
        return DataLoss(fmt::format("{}: malformed manifest: file name \"{}\" is not a plain "
                                    "name in the checkpoint folder", path, file.name));
      }
      const std::optional<uint64_t> bytes = GetInteger<uint64_t>(f.at("bytes"));
      if (!bytes) {
        return DataLoss(fmt::format("{}: malformed manifest: the size of \"{}\" is not an "
                                    "integer >= 0", path, file.name));
      }
      file.bytes = *bytes;
      file.fnv1a64 = f.at("fnv1a64").get<std::string>();
      manifest.files.push_back(std::move(file));
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed manifest: {}", path, e.what()));
  }
  return manifest;
}

std::vector<int64_t> ListCheckpoints(const std::string& run_dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir, ec)) {
    const int64_t step = StepOfName(e.path().filename().string());
    if (step >= 0 && e.is_directory() && fs::exists(e.path() / kManifestFile)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Status PruneCheckpoints(const std::string& run_dir, int keep) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0 && e.path().extension() == ".tmp") {
      RETURN_IF_ERROR(RemoveAll(e.path()));
    }
  }
  if (keep <= 0) return Status::Ok();
  std::string latest;
  if (auto text = ReadFile(run_dir + "/" + kLatestFile); text.ok()) {
    latest = *text;
    while (!latest.empty() && latest.back() == '\n') latest.pop_back();
  }
  const std::vector<int64_t> steps = ListCheckpoints(run_dir);
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    const std::string name = CheckpointDirName(steps[i]);
    if (name == latest) continue;
    RETURN_IF_ERROR(RemoveAll(run_dir + "/" + name));
  }
  return Status::Ok();
}

}  // namespace anvil::io
