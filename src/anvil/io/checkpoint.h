// Checkpoint folders: RUN/step_<N>/ holding any files plus manifest.json (size
// and FNV-1a 64 of each file). Written atomically — files go to
// RUN/step_<N>.tmp/, are fsynced with the folder, the folder is renamed to
// step_<N>/, and then RUN/latest (a one-line file naming the folder) is
// replaced atomically — so a crash at any point leaves the previous checkpoint
// loadable. Loading verifies every file against the manifest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::io {

inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kLatestFile[] = "latest";

// "step_<N>" (no padding).
std::string CheckpointDirName(int64_t step);
// RUN/step_<N>.tmp: where CheckpointWriter::Begin lets the files of step N be
// written (by every rank of a job) before Commit publishes them.
std::string CheckpointTempDir(const std::string& run_dir, int64_t step);

// Writes one checkpoint. Begin() makes an empty RUN/step_<N>.tmp/ (removing a
// stale one from a crash); the caller writes files under temp_dir(); Commit()
// seals and publishes it. Dropped without Commit(), the temp folder is left
// for the next Begin() or Prune to remove, and nothing else changes.
class CheckpointWriter {
 public:
  static Result<CheckpointWriter> Begin(const std::string& run_dir, int64_t step);

  const std::string& temp_dir() const { return temp_dir_; }
  // temp_dir()/name.
  std::string Path(const std::string& name) const { return temp_dir_ + "/" + name; }

  // Checksums and fsyncs every file in the temp folder, writes the manifest,
  // fsyncs the folder, renames it to step_<N>/ (replacing an existing one),
  // fsyncs the run folder and points RUN/latest at it. Returns the final path.
  Result<std::string> Commit();

 private:
  CheckpointWriter(std::string run_dir, int64_t step);
  std::string run_dir_, temp_dir_, final_dir_;
  int64_t step_;
  bool committed_ = false;
};

struct CheckpointInfo {
  std::string dir;  // the checkpoint folder
  int64_t step = 0;
};

// What manifest.json lists: the step and each file's name, size and checksum.
struct CheckpointManifest {
  struct File {
    std::string name;  // a plain name inside the checkpoint folder
    uint64_t bytes = 0;
    std::string fnv1a64;  // as written: 16 lowercase hex digits
  };
  int64_t step = 0;
  std::vector<File> files;
};

// Parses manifest.json text; `path` names it in errors. Checks the shape only
// (a step >= 0, file names without '/' that stay in the folder), not the files.
Result<CheckpointManifest> ParseCheckpointManifest(std::string_view text, const std::string& path);

// What OpenCheckpoint verifies: every listed file's checksum (a resume,
// which reads them all), or the model's only (a load for inference or as a
// new run's start reads no optimizer state, whose files are most of a
// checkpoint's bytes: there only their sizes are checked).
enum class CheckpointRead { kAll, kModel };

// Resolves `path` to a checkpoint folder: a checkpoint folder itself, a run
// folder (its `latest`), or a `latest` file. Then verifies the manifest: every
// listed file present with its size and checksum (DataLoss naming the file).
Result<CheckpointInfo> OpenCheckpoint(const std::string& path,
                                      CheckpointRead read = CheckpointRead::kAll);

// The steps of the complete checkpoints in run_dir (step_<N>/ folders holding
// a manifest), ascending.
std::vector<int64_t> ListCheckpoints(const std::string& run_dir);

// Removes all but the newest `keep` complete checkpoints (never the one
// `latest` names) and any leftover step_*.tmp folders. keep <= 0 keeps all.
Status PruneCheckpoints(const std::string& run_dir, int keep);

}  // namespace anvil::io
