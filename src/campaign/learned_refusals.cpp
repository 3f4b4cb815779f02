// Learned refusals.
#include "campaign/learned_refusals.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "ir/onnx_io.h"

namespace quorum::campaign {

bool LearnedRefusals::learn(const std::string& backend, const backends::Refusal& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& list = by_backend_[backend];
  if (std::find(list.begin(), list.end(), r) != list.end()) return false;
  list.push_back(r);
  return true;
}

std::optional<LearnedRefusals::Match> LearnedRefusals::match(const std::string& backend, const ir::Graph& g) const {
  std::vector<backends::Refusal> list;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = by_backend_.find(backend);
    if (it == by_backend_.end()) return std::nullopt;
    list = it->second;
  }
  std::map<int, std::optional<ir::OnnxSummary>> exported;  // the model's ONNX export, once per opset
  for (const auto& r : list) {
    std::vector<std::string> nodes;
    if (r.onnx_opset == 0) {
      nodes = r.nodes_in(g);
    } else {
      auto it = exported.find(r.onnx_opset);
      if (it == exported.end()) {
        std::optional<ir::OnnxSummary> s;
        try {
          s = ir::onnx_summary(ir::graph_to_onnx(g, r.onnx_opset), g.name);
        } catch (const std::exception&) {
          // a model the exporter cannot write: the backend refuses it on its own
        }
        it = exported.emplace(r.onnx_opset, std::move(s)).first;
      }
      if (it->second) nodes = r.nodes_in(*it->second);
    }
    if (!nodes.empty()) return Match{r, std::move(nodes)};
  }
  return std::nullopt;
}

size_t LearnedRefusals::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [b, list] : by_backend_) n += list.size();
  return n;
}

std::vector<std::string> node_ops(const ir::Graph& g, const std::vector<std::string>& nodes) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& n : g.nodes)
    if (std::find(nodes.begin(), nodes.end(), n.name) != nodes.end() && seen.insert(n.op).second)
      out.push_back(n.op);
  return out;
}

namespace {

constexpr const char* kReason = "reason: ";

// A backend's reason with what varies from model to model elided: node names ("node 'conv_3'" ->
// "node") and numbers standing alone ("kernel 7 > 5" -> "kernel # > #"; not the 2 of conv2d).
std::string reason_key(const std::string& reason) {
  std::string out;
  for (size_t i = 0; i < reason.size(); ++i) {
    if (reason.compare(i, 6, "node '") == 0) {
      if (const size_t end = reason.find('\'', i + 6); end != std::string::npos) {
        out += "node";
        i = end;
        continue;
      }
    }
    const bool alone = i == 0 || !(std::isalnum(static_cast<unsigned char>(reason[i - 1])) || reason[i - 1] == '_');
    if (alone && std::isdigit(static_cast<unsigned char>(reason[i]))) {
      while (i + 1 < reason.size() &&
             (std::isdigit(static_cast<unsigned char>(reason[i + 1])) || reason[i + 1] == '.'))
        ++i;
      out += '#';
      continue;
    }
    out += reason[i];
  }
  return out;
}

}  // namespace

CountedRefusal counted_refusal(const ir::Graph& g, const std::string& message) {
  CountedRefusal c;
  if ((c.learned = backends::parse_refusal(message))) {
    c.key = c.learned->key();
    c.ops = node_ops(g, c.learned->nodes_in(g));
    return c;
  }
  c.key = kReason + reason_key(message);
  // "node 'NAME': why" (evaluate.cpp's admit): the node's operator.
  if (message.rfind("node '", 0) == 0)
    if (const size_t end = message.find('\'', 6); end != std::string::npos)
      c.ops = node_ops(g, {message.substr(6, end - 6)});
  return c;
}

bool learned_key(const std::string& key) { return key.rfind(kReason, 0) != 0; }

}  // namespace quorum::campaign
