// `anvil report`: one self-contained HTML page of a training run (or two
// overlaid): loss with validation loss, learning rate, grad norm, tokens/s,
// MFU and memory high-water over steps as inline SVG (for `anvil sft` and
// `anvil rl` runs also held-out accuracy and reward), a summary table, the
// resolved config (differing keys highlighted when comparing) and the
// machine. The page fetches nothing — no scripts, fonts, styles or images
// from elsewhere — so it opens offline and can be archived or mailed as is.
#pragma once

#include <string>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/train/report_run.h"

namespace anvil::train {

struct ReportOptions {
  std::string run_dir{};
  std::string compare_dir{};  // empty: a report of run_dir alone
  std::string out{};          // empty: run_dir/report.html
};

// The page of one run, or of two overlaid (runs[0] is the main one).
std::string RenderReport(const std::vector<RunRecord>& runs);

// Loads the run folder(s), renders, writes the page atomically and returns
// the path written. Errors name the folder or the metrics file and line.
Result<std::string> WriteReport(const ReportOptions& options);

}  // namespace anvil::train
