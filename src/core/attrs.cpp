// Attribute helpers.
#include "core/attrs.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace quorum::core {

AttrKind kind_of(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

std::string to_string(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::String: return "string";
    case AttrKind::Ints: return "ints";
    case AttrKind::Floats: return "floats";
  }
  return "?";
}

namespace {
std::string fmt_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(17);
  os << d;
  // Shortest form that round-trips.
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << d;
    if (std::stod(t.str()) == d) return t.str();
  }
  return os.str();
}
}  // namespace

std::string to_string(const AttrValue& v) {
  std::ostringstream os;
  switch (kind_of(v)) {
    case AttrKind::Int: os << std::get<int64_t>(v); break;
    case AttrKind::Float: os << fmt_double(std::get<double>(v)); break;
    case AttrKind::String: os << '"' << std::get<std::string>(v) << '"'; break;
    case AttrKind::Ints: {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      os << "[";
      for (size_t i = 0; i < xs.size(); ++i) os << (i ? "," : "") << xs[i];
      os << "]";
      break;
    }
    case AttrKind::Floats: {
      const auto& xs = std::get<std::vector<double>>(v);
      os << "[";
      for (size_t i = 0; i < xs.size(); ++i) os << (i ? "," : "") << fmt_double(xs[i]);
      os << "]";
      break;
    }
  }
  return os.str();
}

std::string to_string(const Attrs& a) {
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : a) {
    s += (first ? "" : ", ") + k + "=" + to_string(v);
    first = false;
  }
  return s + "}";
}

namespace {
const AttrValue& find(const Attrs& a, const std::string& name) {
  auto it = a.find(name);
  QUORUM_CHECK(it != a.end(), "attribute '" + name + "' missing (spec defaults not applied?)");
  return it->second;
}
template <class T>
const T& get_as(const Attrs& a, const std::string& name) {
  const AttrValue& v = find(a, name);
  QUORUM_CHECK(std::holds_alternative<T>(v), "attribute '" + name + "' has kind " + to_string(kind_of(v)));
  return std::get<T>(v);
}
}  // namespace

int64_t attr_i(const Attrs& a, const std::string& name) { return get_as<int64_t>(a, name); }
double attr_f(const Attrs& a, const std::string& name) {
  const AttrValue& v = find(a, name);
  if (std::holds_alternative<int64_t>(v)) return static_cast<double>(std::get<int64_t>(v));
  return get_as<double>(a, name);
}
const std::string& attr_s(const Attrs& a, const std::string& name) { return get_as<std::string>(a, name); }
const std::vector<int64_t>& attr_ints(const Attrs& a, const std::string& name) {
  return get_as<std::vector<int64_t>>(a, name);
}
const std::vector<double>& attr_floats(const Attrs& a, const std::string& name) {
  return get_as<std::vector<double>>(a, name);
}

}  // namespace quorum::core
