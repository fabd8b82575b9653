// The run report page (see report.h): summary, plots, config, machine.
#include "anvil/train/report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "anvil/core/file_util.h"
#include "anvil/train/report_config.h"
#include "anvil/train/report_machine.h"
#include "anvil/train/report_plot.h"

namespace anvil::train {
namespace {

// Run A, run B: distinguishable in colour and in grey print.
const char* const kColors[] = {"#2563eb", "#ea580c"};

// Styles live in the page: nothing is fetched, fonts are the system's own.
constexpr const char* kStyle = R"css(
:root { color-scheme: light; }
body { margin: 0; background: #f3f4f6; color: #111827;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 10px; }
h3 { font-size: 14px; margin: 0 0 8px; }
.sub { color: #6b7280; margin: 0 0 4px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
          margin-right: 6px; vertical-align: -1px; }
.card { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 12px 14px; }
.grid2 { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
.plots .card { padding: 6px; }
svg.plot { width: 100%; height: auto; display: block; }
svg.plot text { font-family: inherit; fill: #374151; }
svg.plot .title { font-size: 15px; font-weight: 600; fill: #111827; }
svg.plot .tick { font-size: 11px; fill: #6b7280; }
svg.plot .axis, svg.plot .legend { font-size: 12px; }
svg.plot .nodata { font-size: 14px; fill: #9ca3af; }
svg.plot .grid { stroke: #e5e7eb; stroke-width: 1; }
svg.plot .frame { fill: none; stroke: #9ca3af; stroke-width: 1; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 10px 4px 0; border-bottom: 1px solid #f0f1f3;
         vertical-align: top; }
th { font-weight: 600; color: #374151; }
table.summary th:first-child { width: 250px; white-space: nowrap; }
td.num { font-variant-numeric: tabular-nums; }
pre { margin: 0; font: 12.5px/1.5 ui-monospace, "DejaVu Sans Mono", monospace;
      white-space: pre-wrap; overflow-wrap: anywhere; }
.diff { background: #fef3c7; display: inline-block; width: 100%; }
.note { color: #92400e; background: #fffbeb; border: 1px solid #fde68a; border-radius: 6px;
        padding: 8px 10px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
td code { overflow-wrap: anywhere; }  /* long run-folder paths wrap inside their cell */
)css";

std::string Swatch(size_t run) {
  return fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", kColors[run]);
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Steps after the first: the first step of a session pays for warm-up (first
// touch of every buffer), which is not the run's throughput.
std::vector<double> SteadyValues(const RunRecord& r, double StepMetrics::*field) {
  std::vector<double> v;
  for (size_t i = r.steps.size() > 1 ? 1 : 0; i < r.steps.size(); ++i) {
    if (std::isfinite(r.steps[i].*field)) v.push_back(r.steps[i].*field);
  }
  return v;
}

std::string Num(double v, const char* format = "{:.4f}") {
  return std::isfinite(v) ? fmt::format(fmt::runtime(format), v) : "n/a";
}

// --- summary -----------------------------------------------------------

std::string SummaryTable(const std::vector<RunRecord>& runs) {
  using Cell = std::function<std::string(const RunRecord&)>;
  const std::vector<std::pair<const char*, Cell>> rows = {
      {"folder", [](const RunRecord& r) { return "<code>" + HtmlEscape(r.dir) + "</code>"; }},
      {"steps logged",
       [](const RunRecord& r) {
         if (r.steps.empty()) return std::string("0");
         return fmt::format("{} ({}&ndash;{})", r.steps.size(), r.steps.front().step,
                            r.steps.back().step);
       }},
      {"tokens seen",
       [](const RunRecord& r) {
         if (r.steps.empty()) return std::string("n/a");
         const int64_t t = r.steps.back().tokens;
         return t >= 1000000 ? fmt::format("{:.2f} M", t / 1e6) : fmt::format("{}", t);
       }},
      {"final training loss",
       [](const RunRecord& r) { return r.steps.empty() ? "n/a" : Num(r.steps.back().loss); }},
      {"final validation loss",
       [](const RunRecord& r) {
         if (r.evals.empty()) return std::string("n/a");
         return fmt::format("{} (step {})", Num(r.evals.back().val_loss), r.evals.back().step);
       }},
      {"best validation loss",
       [](const RunRecord& r) {
         const EvalMetrics* best = nullptr;
         for (const EvalMetrics& e : r.evals) {
           if (std::isfinite(e.val_loss) && (best == nullptr || e.val_loss < best->val_loss)) {
             best = &e;
           }
         }
         return best ? fmt::format("{} (step {})", Num(best->val_loss), best->step) : "n/a";
       }},
      {"final held-out accuracy",
       [](const RunRecord& r) {
         if (r.heldout_accuracy.empty()) return std::string("n/a");
         const auto& [step, accuracy] = r.heldout_accuracy.back();
         return fmt::format("{:.1f} % (step {})", 100 * accuracy, step);
       }},
      {"median tokens/s (after step 1)",
       [](const RunRecord& r) {
         return Num(Median(SteadyValues(r, &StepMetrics::tokens_per_s)), "{:.0f}");
       }},
      {"median MFU (after step 1)",
       [](const RunRecord& r) {
         return Num(100 * Median(SteadyValues(r, &StepMetrics::mfu)), "{:.2f} %");
       }},
      {"memory high-water",
       [](const RunRecord& r) {
         int64_t peak = 0;
         for (const StepMetrics& s : r.steps) peak = std::max(peak, s.mem_high_water);
         if (peak <= 0) return std::string("n/a");
         return peak >= (int64_t{1} << 30) ? fmt::format("{:.2f} GiB", peak / double(int64_t{1} << 30))
                                           : fmt::format("{:.1f} MiB", peak / double(1 << 20));
       }},
      {"training time (sum of steps)",
       [](const RunRecord& r) {
         double t = 0;
         for (const StepMetrics& s : r.steps) t += std::isfinite(s.seconds) ? s.seconds : 0;
         return fmt::format(fmt::runtime(t < 10 ? "{:.3f} s" : "{:.1f} s"), t);
       }},
  };
  std::string html = "<div class=\"card\"><table class=\"summary\">\n<tr><th></th>";
  for (size_t i = 0; i < runs.size(); ++i) {
    html += "<th>" + Swatch(i) + HtmlEscape(runs[i].name) + "</th>";
  }
  html += "</tr>\n";
  for (const auto& [label, cell] : rows) {
    html += fmt::format("<tr><th>{}</th>", label);
    for (const RunRecord& r : runs) html += "<td class=\"num\">" + cell(r) + "</td>";
    html += "</tr>\n";
  }
  return html + "</table></div>\n";
}

// --- plots -------------------------------------------------------------

using Points = std::vector<std::pair<double, double>>;

Points StepPoints(const RunRecord& r, const std::function<double(const StepMetrics&)>& y) {
  Points p;
  p.reserve(r.steps.size());
  for (const StepMetrics& s : r.steps) p.emplace_back(static_cast<double>(s.step), y(s));
  return p;
}

std::string Plots(const std::vector<RunRecord>& runs) {
  const bool compare = runs.size() > 1;
  auto label = [&](size_t i, const char* what) {
    return compare ? fmt::format("{} {}", runs[i].name, what) : std::string(what);
  };
  // One series per run, named by the run when comparing (alone it needs no legend).
  auto per_run = [&](const std::function<double(const StepMetrics&)>& y) {
    std::vector<PlotSeries> out;
    for (size_t i = 0; i < runs.size(); ++i) {
      out.push_back({.label = compare ? runs[i].name : "", .color = kColors[i],
                     .points = StepPoints(runs[i], y)});
    }
    return out;
  };

  std::vector<PlotSeries> loss;
  for (size_t i = 0; i < runs.size(); ++i) {
    loss.push_back({.label = label(i, "train"), .color = kColors[i],
                    .points = StepPoints(runs[i], [](const StepMetrics& s) { return s.loss; })});
    Points val;
    for (const EvalMetrics& e : runs[i].evals) val.emplace_back(static_cast<double>(e.step), e.val_loss);
    loss.push_back({.label = label(i, "validation"), .color = kColors[i], .dashed = true,
                    .markers = true, .points = std::move(val)});
  }

  // Memory in the unit that keeps tick labels short.
  int64_t peak = 0;
  for (const RunRecord& r : runs) {
    for (const StepMetrics& s : r.steps) peak = std::max(peak, s.mem_high_water);
  }
  const bool gib = peak >= (int64_t{4} << 30);
  const double mem_unit = gib ? double(int64_t{1} << 30) : double(1 << 20);

  std::string html = "<div class=\"grid2 plots\">\n";
  auto cell = [&](const PlotSpec& spec, const std::vector<PlotSeries>& series) {
    html += "<div class=\"card\">" + SvgLinePlot(spec, series) + "</div>\n";
  };
  cell({.title = "Loss", .y_label = "cross-entropy (nats/token)"}, loss);
  // Post-training: held-out accuracy (sft, rl) and the reward (rl), where logged.
  const auto pairs = [&](std::vector<std::pair<int64_t, double>> RunRecord::*field, double scale,
                         bool markers) {
    std::vector<PlotSeries> out;
    bool any = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      Points p;
      for (const auto& [step, v] : runs[i].*field) {
        p.emplace_back(static_cast<double>(step), scale * v);
      }
      any = any || !p.empty();
      out.push_back({.label = compare ? runs[i].name : "",
                     .color = kColors[i],
                     .markers = markers,
                     .points = std::move(p)});
    }
    return any ? out : std::vector<PlotSeries>{};
  };
  if (auto accuracy = pairs(&RunRecord::heldout_accuracy, 100, true); !accuracy.empty()) {
    cell({.title = "Held-out accuracy", .y_label = "problems solved (%)", .zero_based = true},
         accuracy);
  }
  if (auto reward = pairs(&RunRecord::rewards, 1, false); !reward.empty()) {
    cell({.title = "Reward", .y_label = "mean reward of the step's samples"}, reward);
  }
  cell({.title = "Learning rate", .y_label = "learning rate", .zero_based = true},
       per_run([](const StepMetrics& s) { return s.lr; }));
  cell({.title = "Gradient norm", .y_label = "global L2 norm (before clipping)"},
       per_run([](const StepMetrics& s) { return s.grad_norm; }));
  cell({.title = "Throughput", .y_label = "tokens/s", .zero_based = true},
       per_run([](const StepMetrics& s) { return s.tokens_per_s; }));
  cell({.title = "Model FLOPs utilisation", .y_label = "MFU (% of measured peak)",
        .zero_based = true},
       per_run([](const StepMetrics& s) { return 100 * s.mfu; }));
  cell({.title = "Memory high-water",
        .y_label = gib ? "peak resident (GiB)" : "peak resident (MiB)",
        .zero_based = true},
       per_run([&](const StepMetrics& s) {
         return s.mem_high_water > 0 ? s.mem_high_water / mem_unit : NAN;
       }));
  return html + "</div>\n";
}

// --- config and machine ------------------------------------------------

// The config text, lines whose key is in `highlight` marked.
std::string ConfigPre(const RunRecord& r, const std::set<std::string>& highlight) {
  if (!r.config_toml) return "<p class=\"note\">" + HtmlEscape(r.config_note) + "</p>";
  std::string html = "<pre>";
  std::string table, line;
  size_t start = 0;
  const std::string& text = *r.config_toml;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    line = text.substr(start, end - start);
    const std::string key = ConfigLineKey(line, table);
    html += highlight.count(key) ? "<span class=\"diff\">" + HtmlEscape(line) + "</span>\n"
                                 : HtmlEscape(line) + "\n";
    start = end + 1;
  }
  return html + "</pre>";
}

std::string Configs(const std::vector<RunRecord>& runs) {
  std::set<std::string> differing;
  std::string html;
  if (runs.size() == 2 && runs[0].config_toml && runs[1].config_toml) {
    const auto a = ConfigEntries(*runs[0].config_toml);
    const auto b = ConfigEntries(*runs[1].config_toml);
    differing = DifferingKeys(a, b);
    html += "<div class=\"card\" style=\"margin-bottom:14px\"><h3>Differing keys</h3>";
    if (differing.empty()) {
      html += "<p class=\"sub\">none: the resolved configs are the same</p>";
    } else {
      html += fmt::format("<table><tr><th>key</th><th>{}{}</th><th>{}{}</th></tr>\n", Swatch(0),
                          HtmlEscape(runs[0].name), Swatch(1), HtmlEscape(runs[1].name));
      auto value = [](const std::map<std::string, std::string>& m, const std::string& k) {
        const auto it = m.find(k);
        return it == m.end() ? std::string("<i>absent</i>") : "<code>" + HtmlEscape(it->second) + "</code>";
      };
      for (const std::string& k : differing) {
        html += fmt::format("<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                            HtmlEscape(k), value(a, k), value(b, k));
      }
      html += "</table>";
    }
    html += "</div>\n";
  }
  html += runs.size() > 1 ? "<div class=\"grid2\">\n" : "<div>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    html += fmt::format("<div class=\"card\"><h3>{}{} <span class=\"sub\">config.toml</span></h3>{}</div>\n",
                        Swatch(i), HtmlEscape(runs[i].name), ConfigPre(runs[i], differing));
  }
  return html + "</div>\n";
}

std::string Machines(const std::vector<RunRecord>& runs) {
  std::string html = runs.size() > 1 ? "<div class=\"grid2\">\n" : "<div>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    html += fmt::format("<div class=\"card\"><h3>{}{}</h3>", Swatch(i), HtmlEscape(r.name));
    if (r.machine.empty()) {
      html += "<p class=\"note\">" + HtmlEscape(r.machine_note) + "</p>";
    } else {
      html += "<table>";
      for (const auto& [label, value] : r.machine) {
        html += fmt::format("<tr><th>{}</th><td>{}</td></tr>", HtmlEscape(label), HtmlEscape(value));
      }
      html += "</table>";
    }
    html += "</div>\n";
  }
  return html + "</div>\n";
}

}  // namespace

std::string RenderReport(const std::vector<RunRecord>& runs) {
  CHECK(runs.size() == 1 || runs.size() == 2) << "a report shows one run or two";
  std::string title = "anvil report: " + runs[0].name;
  if (runs.size() > 1) title += " vs " + runs[1].name;
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
      HtmlEscape(title), kStyle);
  html += "<h1>" + HtmlEscape(title) + "</h1>\n";
  html += fmt::format("<p class=\"sub\">generated {} by <code>anvil report</code>",
                      UtcNow("%Y-%m-%d %H:%M UTC"));
  if (runs.size() > 1) {
    html += fmt::format(" &middot; {}{} &middot; {}{}", Swatch(0), HtmlEscape(runs[0].name), Swatch(1),
                        HtmlEscape(runs[1].name));
  }
  html += "</p>\n<h2>Summary</h2>\n" + SummaryTable(runs);
  html += "<h2>Training curves</h2>\n" + Plots(runs);
  html += "<h2>Machine</h2>\n" + Machines(runs);
  html += "<h2>Resolved config</h2>\n" + Configs(runs);
  return html + "</main>\n</body>\n</html>\n";
}

Result<std::string> WriteReport(const ReportOptions& options) {
  std::vector<RunRecord> runs;
  ASSIGN_OR_RETURN(RunRecord a, LoadRun(options.run_dir));
  runs.push_back(std::move(a));
  if (!options.compare_dir.empty()) {
    ASSIGN_OR_RETURN(RunRecord b, LoadRun(options.compare_dir));
    runs.push_back(std::move(b));
    DisambiguateNames(runs[0], runs[1]);
  }
  const std::string out = options.out.empty()
                              ? (std::filesystem::path(options.run_dir) / "report.html").string()
                              : options.out;
  RETURN_IF_ERROR(WriteFileAtomic(out, RenderReport(runs)));
  return out;
}

}  // namespace anvil::train
