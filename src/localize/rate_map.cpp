// The localization map.
#include "localize/rate_map.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/fileio.h"

namespace quorum::localize {

namespace {

constexpr double kNonFinite = 1e30;

// Mean absolute difference of the tensors both runs hold under `names` (shapes must agree).
bool mad(const std::vector<std::string>& names, const backends::ValueMap& a, const backends::ValueMap& b, double& out) {
  double sum = 0;
  int64_t n = 0;
  for (const auto& v : names) {
    auto x = a.find(v), y = b.find(v);
    if (x == a.end() || y == b.end() || x->second.shape() != y->second.shape()) continue;
    for (int64_t i = 0; i < x->second.numel(); ++i) {
      const double p = x->second.get(i), q = y->second.get(i);
      if (std::isnan(p) && std::isnan(q)) continue;
      const double d = std::abs(p - q);
      sum += std::isfinite(d) ? d : (p == q ? 0 : kNonFinite);
    }
    n += x->second.numel();
  }
  if (n == 0) return false;
  out = sum / static_cast<double>(n);
  return true;
}

std::string num(double v) {
  if (!std::isfinite(v)) return v > 0 ? "\"inf\"" : "\"nan\"";
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

std::string short_num(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

std::string escape_json(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o;
}

std::string escape_dot(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

}  // namespace

RateMap rate_map(const ir::Graph& g, bool backward, const std::string& blamed_name, const backends::ValueMap& blamed,
                 const std::string& other_name, const backends::ValueMap& other, const backends::ValueMap& ref) {
  RateMap m;
  m.stage = backward ? core::Stage::Backward : core::Stage::Forward;
  m.blamed = blamed_name;
  m.other = other_name;
  std::map<std::string, size_t> at;  // node -> index
  for (const auto& n : g.nodes) {
    MapNode x;
    x.node = n.name;
    x.op = n.op;
    // The node's state: its outputs (forward), or what it sends back to its inputs and weights —
    // its own contribution where the backend returned one for a value several nodes consume.
    std::vector<std::string> state = n.outputs;
    if (backward) {
      state.clear();
      for (const auto& v : n.inputs) {
        const std::string key = backends::contribution_key(v, n.name);
        state.push_back(blamed.count(key) && other.count(key) ? key : v);
      }
    }
    x.judged = mad(state, blamed, other, x.delta);
    if (!mad(state, blamed, ref, x.delta_ref)) x.delta_ref = 0;
    at[n.name] = m.nodes.size();
    m.nodes.push_back(x);
  }
  // Predecessors: the producers of a node's inputs (forward); its outputs' incoming gradients (backward).
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    MapNode& x = m.nodes[k];
    double pre = 0;
    if (backward) {
      mad(n.outputs, blamed, other, pre);
    } else {
      for (size_t i = 0; i < ir::data_input_count(n); ++i)
        if (const ir::Node* p = g.producer(n.inputs[i])) pre = std::max(pre, m.nodes[at.at(p->name)].delta);
    }
    x.delta_pre = pre;
    x.rate = x.judged ? (x.delta - pre) / (pre + m.epsilon) : 0;
  }
  std::vector<double> rates;
  for (const auto& x : m.nodes)
    if (x.judged) rates.push_back(x.rate);
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    // The third quartile (linear interpolation between order statistics).
    const double pos = 0.75 * static_cast<double>(rates.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const double frac = pos - static_cast<double>(lo);
    m.q3 = lo + 1 < rates.size() ? rates[lo] + frac * (rates[lo + 1] - rates[lo]) : rates[lo];
  }
  for (auto& x : m.nodes) x.highlighted = x.judged && x.rate > 0 && x.rate >= m.q3;
  if (backward) {
    for (auto it = m.nodes.rbegin(); it != m.nodes.rend() && m.first.empty(); ++it)
      if (it->highlighted) m.first = it->node;
  } else {
    for (const auto& x : m.nodes)
      if (x.highlighted && m.first.empty()) m.first = x.node;
  }
  return m;
}

std::string to_json(const RateMap& m) {
  std::ostringstream os;
  os << "{\n \"stage\": \"" << core::to_string(m.stage) << "\",\n \"blamed\": \"" << escape_json(m.blamed)
     << "\",\n \"other\": \"" << escape_json(m.other) << "\",\n \"epsilon\": " << num(m.epsilon)
     << ",\n \"q3\": " << num(m.q3) << ",\n \"first_highlighted\": \"" << escape_json(m.first)
     << "\",\n \"nodes\": [\n";
  for (size_t i = 0; i < m.nodes.size(); ++i) {
    const MapNode& x = m.nodes[i];
    os << "  {\"node\": \"" << escape_json(x.node) << "\", \"op\": \"" << escape_json(x.op)
       << "\", \"delta\": " << num(x.delta) << ", \"delta_ref\": " << num(x.delta_ref)
       << ", \"delta_pre\": " << num(x.delta_pre) << ", \"rate\": " << num(x.rate)
       << ", \"highlighted\": " << (x.highlighted ? "true" : "false")
       << ", \"judged\": " << (x.judged ? "true" : "false") << "}" << (i + 1 < m.nodes.size() ? "," : "") << "\n";
  }
  os << " ]\n}\n";
  return os.str();
}

std::string to_dot(const ir::Graph& g, const RateMap& m) {
  double max_rate = 0;
  for (const auto& x : m.nodes)
    if (x.judged && std::isfinite(x.rate)) max_rate = std::max(max_rate, x.rate);
  std::ostringstream os;
  os << "digraph map {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
        "fontsize=10];\n"
     << "  label=\""
     << escape_dot(std::string(core::to_string(m.stage)) + " localization map: " + m.blamed + " vs " + m.other +
                   (m.first.empty() ? "" : "; first highlighted: " + m.first))
     << "\";\n";
  std::map<std::string, std::string> id;
  for (const auto& in : g.inputs) {
    id[in.name] = "v" + std::to_string(id.size());
    os << "  " << id[in.name] << " [label=\"" << escape_dot(in.name) << "\", shape=ellipse, fillcolor=\"#eeeeee\"];\n";
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[k];
    const MapNode& x = m.nodes[k];
    // White (rate <= 0) to red (the largest rate), on a log scale.
    double t = 0;
    if (x.judged && x.rate > 0)
      t = max_rate > 0 && std::isfinite(x.rate) ? std::log1p(x.rate) / std::log1p(max_rate) : 1;
    char fill[16];
    const int gb = static_cast<int>(255 * (1 - std::clamp(t, 0.0, 1.0)));
    std::snprintf(fill, sizeof fill, "#ff%02x%02x", gb, gb);
    const std::string nid = "n" + std::to_string(k);
    for (const auto& o : n.outputs) id[o] = nid;
    os << "  " << nid << " [label=\""
       << escape_dot(n.name + "\n" + n.op + "\ndelta " + short_num(x.delta) + "  R " + short_num(x.rate))
       << "\", fillcolor=\"" << fill << "\"" << (x.highlighted ? ", penwidth=3, color=\"#1f4e9e\"" : "") << "];\n";
  }
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (size_t i = 0; i < ir::data_input_count(g.nodes[k]); ++i) {
      auto it = id.find(g.nodes[k].inputs[i]);
      if (it != id.end()) os << "  " << it->second << " -> n" << k << ";\n";
    }
  os << "}\n";
  return os.str();
}

std::string render_svg(const std::string& dot) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path();
  const std::string stem =
      "quorum-map-" + std::to_string(::getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(&dot));
  const fs::path in = dir / (stem + ".dot"), out = dir / (stem + ".svg");
  core::write_file_atomic(in.string(), dot);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 2);
    ::execlp("dot", "dot", "-Tsvg", in.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  std::string svg;
  std::error_code ec;
  if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && fs::exists(out, ec))
    svg = core::read_file(out.string());
  fs::remove(in, ec);
  fs::remove(out, ec);
  return svg;
}

}  // namespace quorum::localize
