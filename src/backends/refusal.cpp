// Structured refusals: their text form and matching them against models.
#include "backends/refusal.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>


namespace quorum::backends {

namespace {

constexpr const char* kPrefix = "unsupported: ";

// Spaces, brackets and quotes (and Python's bytes prefix b'...') removed.
std::string plain(const std::string& s) {
  std::string t = s;
  if (t.size() >= 3 && t[0] == 'b' && (t[1] == '\'' || t[1] == '"')) t = t.substr(1);
  std::string out;
  for (char c : t)
    if (c != ' ' && c != '[' && c != ']' && c != '(' && c != ')' && c != '\'' && c != '"') out.push_back(c);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

bool number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

}  // namespace

bool same_attr_value(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = split(plain(a), ','), y = split(plain(b), ',');
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    double u = 0, v = 0;
    if (number(x[i], u) && number(y[i], v)) {
      if (!(std::fabs(u - v) <= 1e-6 * std::max(1.0, std::fabs(u)))) return false;
    } else if (x[i] != y[i]) {
      return false;
    }
  }
  return true;
}

std::string Refusal::key() const {
  std::string k = op;
  if (!attr.empty()) k += " " + attr + "=" + value;
  if (onnx_opset > 0) k += " (ONNX opset " + std::to_string(onnx_opset) + ")";
  return k;
}

std::string Refusal::str() const { return kPrefix + key(); }

std::optional<Refusal> parse_refusal(const std::string& text) {
  if (text.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string rest = text.substr(std::string(kPrefix).size());
  Refusal r;
  if (const auto p = rest.find(" (ONNX opset "); p != std::string::npos && rest.back() == ')') {
    const std::string n = rest.substr(p + 13, rest.size() - p - 14);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v <= 0) return std::nullopt;
    r.onnx_opset = static_cast<int>(v);
    rest = rest.substr(0, p);
  }
  const std::vector<std::string> words = split(rest, ' ');
  if (words.empty() || words.size() > 2 || words[0].empty()) return std::nullopt;
  r.op = words[0];
  if (words.size() == 2) {
    const auto eq = words[1].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == words[1].size()) return std::nullopt;
    r.attr = words[1].substr(0, eq);
    r.value = words[1].substr(eq + 1);
  }
  return r;
}

std::vector<std::string> Refusal::nodes_in(const ir::Graph& g) const {
  std::vector<std::string> out;
  if (onnx_opset == 0) {
    for (const auto& n : g.nodes) {
      if (n.op != op) continue;
      if (!attr.empty()) {
        const auto a = n.attrs.find(attr);
        if (a == n.attrs.end() || !same_attr_value(core::to_string(a->second), value)) continue;
      }
      out.push_back(n.name);
    }
    return out;
  }
  try {
    return nodes_in(ir::onnx_summary(ir::graph_to_onnx(g, onnx_opset), g.name));
  } catch (const std::exception&) {
    return out;  // a model the exporter cannot write is refused by the backend on its own
  }
}

std::vector<std::string> Refusal::nodes_in(const ir::OnnxSummary& s) const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < s.op_types.size(); ++i) {
    if (s.op_types[i] != op) continue;
    if (!attr.empty()) {
      const auto a = s.attrs[i].find(attr);
      if (a == s.attrs[i].end() || !same_attr_value(a->second, value)) continue;
    }
    // A decomposition's helper nodes are named "<node>/<what>": the catalogue node is the prefix.
    const std::string node = s.node_names[i].substr(0, s.node_names[i].find('/'));
    if (seen.insert(node).second) out.push_back(node);
  }
  return out;
}

}  // namespace quorum::backends
