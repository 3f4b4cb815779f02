#include "report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace quorum::report {

std::string escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string num(double v) {
  char b[32];
  if (std::fabs(v) >= 1e4 || (v != 0 && std::fabs(v) < 1e-2)) std::snprintf(b, sizeof b, "%.2g", v);
  else std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

std::string svg_line_plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<Series>& series, int width, int height) {
  const double left = 56, right = 14, top = 28, bottom = 40;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool any = false;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) x0 = x1 = x, y1 = y;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y1 = std::max(y1, y);
      any = true;
    }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + ph - (y - y0) / (y1 - y0) * ph; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\" role=\"img\" aria-label=\"" << escape(title) << "\">\n";
  o << "<text x=\"" << left << "\" y=\"16\" font-size=\"13\" font-weight=\"bold\">" << escape(title) << "</text>\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    o << "<text x=\"" << px(xv) << "\" y=\"" << top + ph + 14 << "\" font-size=\"10\" text-anchor=\"middle\">"
      << num(xv) << "</text>\n";
    o << "<text x=\"" << left - 4 << "\" y=\"" << py(yv) + 3 << "\" font-size=\"10\" text-anchor=\"end\">" << num(yv)
      << "</text>\n";
    o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << py(yv) << "\" y2=\"" << py(yv)
      << "\" stroke=\"#eee\"/>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << height - 6 << "\" font-size=\"11\" text-anchor=\"middle\">"
    << escape(x_label) << "</text>\n";
  o << "<text x=\"12\" y=\"" << top + ph / 2 << "\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 "
    << top + ph / 2 << ")\">" << escape(y_label) << "</text>\n";
  int k = 0;
  for (const auto& s : series) {
    o << "<polyline fill=\"none\" stroke-width=\"1.6\" stroke=\"" << escape(s.color) << "\" points=\"";
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) o << px(x) << "," << py(y) << " ";
    o << "\"/>\n";
    const double ly = top + 12 + 14 * k++;
    o << "<rect x=\"" << left + 8 << "\" y=\"" << ly - 8 << "\" width=\"10\" height=\"3\" fill=\"" << escape(s.color)
      << "\"/>"
      << "<text x=\"" << left + 22 << "\" y=\"" << ly << "\" font-size=\"10\">" << escape(s.name) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace quorum::report
