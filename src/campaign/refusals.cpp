// Learned refusals.
#include "campaign/refusals.h"

#include <algorithm>
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

}  // namespace quorum::campaign
