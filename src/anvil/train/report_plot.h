// Line plots as inline SVG for the run report: no scripts, no fonts, no
// external files, so the page renders offline and archives as one file.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anvil::train {

struct PlotSeries {
  std::string label;   // legend text; empty: not in the legend (a lone series)
  std::string color;   // CSS colour
  bool dashed = false;
  bool markers = false;  // a dot per point (sparse series: validation)
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite ones skipped
};

struct PlotSpec {
  std::string title;
  std::string y_label;  // with its unit: "loss (nats/token)"
  std::string x_label = "step";
  // The y axis includes 0: for amounts (memory, throughput) whose size, not
  // just their wiggle, is the point.
  bool zero_based = false;
};

// "Nice" tick positions (1, 2, 5 x 10^k steps) covering [lo, hi], about
// `target` of them; the first and last bracket the data.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: as few digits as the tick spacing needs, thousands as k/M/G,
// tiny values in exponent form ("3e-04").
std::string FormatTick(double value, double spacing);

// Text made safe inside HTML and SVG elements and attribute values.
std::string HtmlEscape(std::string_view text);

// One <svg> with axes, tick labels, grid, title, axis labels and a legend.
// Series with no finite points are listed in the legend as "(no data)".
std::string SvgLinePlot(const PlotSpec& spec, const std::vector<PlotSeries>& series);

}  // namespace anvil::train
