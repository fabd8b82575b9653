// Inline-SVG line plots (see report_plot.h). Fixed 600 x 340 viewBox scaled
// to its grid cell by CSS; every coordinate is written with one decimal.
#include "anvil/train/report_plot.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace anvil::train {
namespace {

constexpr double kWidth = 600, kHeight = 340;
constexpr double kLeft = 72, kRight = 18, kBottom = 50;
constexpr double kTitleHeight = 30, kLegendRow = 18;
constexpr double kCharWidth = 6.6;  // average width of a 12px sans-serif glyph, for layout only

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// A flat or empty range gets some height, so it maps to a visible line.
Range Padded(Range r) {
  if (r.empty()) return {0, 1};
  if (r.lo == r.hi) {
    const double pad = r.lo == 0 ? 1 : std::abs(r.lo) * 0.1;
    return {r.lo - pad, r.hi + pad};
  }
  return r;
}

std::vector<std::pair<double, double>> Finite(const std::vector<std::pair<double, double>>& pts) {
  std::vector<std::pair<double, double>> out;
  out.reserve(pts.size());
  for (const auto& p : pts) {
    if (std::isfinite(p.first) && std::isfinite(p.second)) out.push_back(p);
  }
  return out;
}

// Long runs have more points than pixels: per pixel column keep the first,
// the lowest and the highest point (in order), so spikes survive and the
// page stays small.
std::vector<std::pair<double, double>> Decimate(const std::vector<std::pair<double, double>>& pts,
                                                double x_lo, double x_hi, int columns) {
  if (static_cast<int>(pts.size()) <= 3 * columns) return pts;
  std::vector<std::pair<double, double>> out;
  size_t i = 0;
  while (i < pts.size()) {
    const int col = static_cast<int>((pts[i].first - x_lo) / (x_hi - x_lo) * columns);
    size_t j = i, lo = i, hi = i;
    while (j < pts.size() &&
           static_cast<int>((pts[j].first - x_lo) / (x_hi - x_lo) * columns) == col) {
      if (pts[j].second < pts[lo].second) lo = j;
      if (pts[j].second > pts[hi].second) hi = j;
      ++j;
    }
    size_t keep[] = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
    for (size_t k = 0; k < 4; ++k) {
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(pts[keep[k]]);
    }
    i = j;
  }
  return out;
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step + 1e-9) * step;
  // Bounded by the tick count: a range of a few ulps of lo gives a step that
  // `t += step` no longer moves.
  for (double t = first; t < hi + step * (1 - 1e-9) && ticks.size() <= static_cast<size_t>(4 * target + 4);
       t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);  // no "-0" from rounding
    if (ticks.back() >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string FormatTick(double value, double spacing) {
  if (value == 0) return "0";
  spacing = std::abs(spacing) > 0 ? std::abs(spacing) : std::abs(value);
  static const std::pair<double, const char*> kSuffixes[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, suffix] : kSuffixes) {
    if (std::abs(value) >= scale && spacing >= scale / 100) {
      const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(spacing / scale) + 1e-9)));
      return fmt::format("{:.{}f}{}", value / scale, decimals, suffix);
    }
  }
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(spacing) + 1e-9)));
  if (decimals > 4) {
    const int digits = static_cast<int>(std::floor(std::log10(std::abs(value)) + 1e-9)) -
                       static_cast<int>(std::floor(std::log10(spacing) + 1e-9));
    return fmt::format("{:.{}e}", value, std::max(0, digits));
  }
  return fmt::format("{:.{}f}", value, decimals);
}

std::string SvgLinePlot(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  // Legend items flow in rows under the title; the plot area starts below.
  struct Item {
    double x, y;
  };
  std::vector<Item> items;
  double lx = kLeft, ly = kTitleHeight + 8;
  for (const PlotSeries& s : series) {
    if (s.label.empty()) {
      items.push_back({-1, -1});
      continue;
    }
    const bool empty = Finite(s.points).empty();
    const double w = 30 + kCharWidth * (s.label.size() + (empty ? 10 : 0)) + 16;
    if (lx + w > kWidth - kRight && lx > kLeft) {
      lx = kLeft;
      ly += kLegendRow;
    }
    items.push_back({lx, ly});
    lx += w;
  }
  const double top = lx > kLeft ? ly + 14 : kTitleHeight + 6;  // no legend: no legend row
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - top - kBottom;

  Range xr, yr;
  std::vector<std::vector<std::pair<double, double>>> finite;
  for (const PlotSeries& s : series) {
    finite.push_back(Finite(s.points));
    for (const auto& [x, y] : finite.back()) {
      xr.Add(x);
      yr.Add(y);
    }
  }
  const bool no_data = xr.empty();
  if (spec.zero_based && !yr.empty()) yr.Add(0);
  xr = Padded(xr);
  yr = Padded(yr);

  // y: the domain is the nice ticks' span, so the top and bottom lines are labelled.
  const std::vector<double> yt = NiceTicks(yr.lo, yr.hi, 5);
  double y_lo = std::min(yt.front(), yr.lo), y_hi = std::max(yt.back(), yr.hi);
  // Data on the top or bottom tick would be drawn on the frame and hide
  // there: leave a little air (without a tick) except at a zero baseline.
  const double air = 0.03 * (y_hi - y_lo);
  if (yr.hi > y_hi - air / 2) y_hi += air;
  if (yr.lo < y_lo + air / 2 && yr.lo != 0) y_lo -= air;
  // x: exactly the steps logged; ticks inside them.
  std::vector<double> xt;
  for (const double t : NiceTicks(xr.lo, xr.hi, 6)) {
    if (t >= xr.lo - 1e-9 && t <= xr.hi + 1e-9) xt.push_back(t);
  }
  auto px = [&](double x) { return kLeft + (x - xr.lo) / (xr.hi - xr.lo) * plot_w; };
  auto py = [&](double y) { return top + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h; };

  std::string svg = fmt::format(
      // No xmlns: inline SVG in HTML needs none, and the page names no URL at all.
      "<svg class=\"plot\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
      kWidth, kHeight, HtmlEscape(spec.title));
  svg += fmt::format("<text class=\"title\" x=\"{}\" y=\"20\">{}</text>\n", kLeft, HtmlEscape(spec.title));

  // Grid and tick labels.
  const double y_spacing = yt.size() > 1 ? yt[1] - yt[0] : std::abs(yt[0]);
  for (const double t : yt) {
    svg += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
                       "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       kLeft, py(t), kLeft + plot_w, py(t), kLeft - 6, py(t) + 4,
                       FormatTick(t, y_spacing));
  }
  const double x_spacing = xt.size() > 1 ? xt[1] - xt[0] : 1;
  for (const double t : xt) {
    svg += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
                       "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       px(t), top, px(t), top + plot_h, px(t), top + plot_h + 16,
                       FormatTick(t, x_spacing));
  }
  svg += fmt::format("<rect class=\"frame\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>\n",
                     kLeft, top, plot_w, plot_h);
  svg += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                     kLeft + plot_w / 2, kHeight - 12, HtmlEscape(spec.x_label));
  svg += fmt::format("<text class=\"axis\" transform=\"translate(16 {:.1f}) rotate(-90)\" "
                     "text-anchor=\"middle\">{}</text>\n",
                     top + plot_h / 2, HtmlEscape(spec.y_label));
  if (no_data) {
    svg += fmt::format("<text class=\"nodata\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no data"
                       "</text>\n",
                       kLeft + plot_w / 2, top + plot_h / 2);
  }

  // Series, then the legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const auto pts = Decimate(finite[i], xr.lo, xr.hi, static_cast<int>(plot_w));
    if (pts.empty()) continue;
    std::string coords;
    for (const auto& [x, y] : pts) coords += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" "
                       "stroke-linejoin=\"round\"{} points=\"{}\"/>\n",
                       s.color, s.dashed ? " stroke-dasharray=\"6 4\"" : "", coords);
    if (s.markers) {
      for (const auto& [x, y] : pts) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\" stroke=\"#fff\"/>",
                           px(x), py(y), s.color);
      }
      svg += "\n";
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const Item& it = items[i];
    if (s.label.empty()) continue;
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                       "stroke-width=\"2\"{}/>",
                       it.x, it.y - 4, it.x + 24, it.y - 4, s.color,
                       s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    if (s.markers) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>", it.x + 12,
                         it.y - 4, s.color);
    }
    svg += fmt::format("<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}{}</text>\n", it.x + 30,
                       it.y, HtmlEscape(s.label), finite[i].empty() ? " (no data)" : "");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace anvil::train
