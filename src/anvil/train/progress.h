// What a person watching a run sees: on a terminal one progress line redrawn
// in place (step/total, loss, tokens/s, ETA); otherwise (and under mpirun,
// whose ranks' output may go to a file) a plain line every
// train.log_every steps. And Ctrl-C: the first SIGINT (or SIGTERM, which
// batch schedulers and `timeout` send) only sets a flag the loop polls
// between steps (it then checkpoints and exits cleanly); a second one
// kills the child process groups it tracks (core/child_groups.h), restores
// the default action and kills the process.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "anvil/train/metrics.h"

namespace anvil::train {

class Progress {
 public:
  // `first_step`: steps already done (a resume); `out`: where to draw.
  Progress(int64_t first_step, int64_t total_steps, int64_t log_every, std::FILE* out = stdout);
  bool is_terminal() const { return tty_; }

  void OnStep(const StepMetrics& m);
  // On a terminal, the progress line of step `step` with `fields` (a
  // command with steps of its own: anvil rl) redrawn in place: "[bar] step
  // s/total  <fields>  ETA"; elsewhere nothing (such a command prints its
  // own lines every so many steps, through Message).
  void DrawStep(int64_t step, const std::string& fields);
  void OnEval(const EvalMetrics& m);
  // The run's step count changed (fitted to a time budget).
  void SetTotal(int64_t total_steps) { total_ = total_steps; }
  // A message on its own line (the progress line is redrawn after it).
  void Message(const std::string& text);
  // Ends the in-place line.
  void Finish();

 private:
  void Clear();
  double Eta(int64_t step) const;  // seconds to the last step at the pace so far (-1: none yet)
  std::FILE* out_;
  bool tty_;
  int64_t first_step_, total_, log_every_;
  double start_ = 0;
  double smoothed_tps_ = 0;
  bool line_open_ = false;
  std::string last_line_;
};

// Installs the SIGINT / SIGTERM handler described above (idempotent).
void InstallStopHandler();
bool StopRequested();
// "Ctrl-C" or "SIGTERM": what asked the run to stop (on a rank that got
// neither, another rank's).
const char* StopSignalName();
// For tests: clears the flag.
void ResetStopSignal();

}  // namespace anvil::train
