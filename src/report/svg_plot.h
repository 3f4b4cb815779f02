// Line plots as standalone SVG text (no library: a report stays one self-contained file).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace quorum::report {

struct Series {
  std::string name;
  std::string color;  // CSS colour
  std::vector<std::pair<double, double>> points;  // (x, y), x increasing
};

// An SVG element (width x height px) with axes, five ticks per axis, a legend and one polyline per
// series. Text is escaped.
std::string svg_line_plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series, int width = 520, int height = 260);

// Text made safe inside HTML/SVG elements and attribute values.
std::string escape(const std::string& s);

}  // namespace quorum::report
