// A campaign's coverage.
#include "campaign/coverage.h"

#include <set>

#include "store/store.h"
#include "ir/build.h"
#include "ops/registry.h"

namespace quorum::campaign {

std::vector<std::string> mapped_operators(worker::Worker& w,
                                          std::vector<std::pair<std::string, std::string>>* refused) {
  std::vector<std::string> mapped;
  for (const ops::OpSpec* spec : ops::catalogue().all()) {
    std::string reason;
    bool ok = false;
    for (uint64_t k = 0; k < 4 && !ok; ++k) {
      core::Rng rng(k + 1);
      ir::SingleNode sn = ir::single_node_graph(*spec, spec->sample(rng), rng);
      ir::quantized_inputs_from_float(sn);  // as the generated quantized models give them
      std::vector<worker::NodeSupport> s;
      const worker::Outcome out = w.supports(sn.graph, false, s);
      if (!out.ok()) {
        reason = out.str();
        break;
      }
      ok = s.at(0).ok;
      if (!ok && reason.empty()) reason = s.at(0).reason;
    }
    if (ok) mapped.push_back(spec->name);
    else if (refused) refused->emplace_back(spec->name, reason);
  }
  return mapped;
}

std::vector<coverage::Fact> run_facts(const ModelCase& m, const Evaluation& ev, const std::string& loss,
                                    int64_t index) {
  std::vector<coverage::Fact> facts = coverage::model_facts(m.graph, index);
  std::set<std::string> ops;
  for (const auto& n : m.graph.nodes) ops.insert(n.op);
  for (const auto& r : ev.runs) {
    if (r.is_reference || r.unsupported || r.outcome.status == worker::Status::Unsupported) continue;
    for (const auto& op : ops) facts.push_back({r.backend, coverage::FactKind::Ran, op, index});
    if (r.trained && !loss.empty()) facts.push_back({r.backend, coverage::FactKind::Ran, loss, index});
  }
  // What each optimizer did in the optimized run ("fused ..." entries of its lowering), once per model.
  for (const auto& r : ev.runs) {
    if (!r.optimized.ran || !r.optimized.outcome.ok()) continue;
    std::set<std::string> fused;
    for (const auto& [node, list] : r.optimized.lowering)
      for (const auto& x : list)
        if (const std::string f = backends::fused_entry(x); !f.empty()) fused.insert(f);
    for (const auto& f : fused) facts.push_back({r.backend, coverage::FactKind::Fused, f, index});
  }
  // Exchange forms: "onnx opset N" and "onnx form what=form,..." per node, as the backend read them.
  for (const auto& [backend, nodes] : ev.exchange) {
    for (const auto& [node, list] : nodes) {
      const ir::Node* n = m.graph.find_node(node);
      for (const auto& x : list) {
        if (x.rfind("onnx opset ", 0) == 0) {
          facts.push_back({backend, coverage::FactKind::Opset, x.substr(11), index});
        } else if (x.rfind("onnx form ", 0) == 0 && n) {
          const std::string forms = x.substr(10);
          for (size_t p = 0; p <= forms.size();) {
            size_t q = forms.find(',', p);
            if (q == std::string::npos) q = forms.size();
            if (q > p)
              facts.push_back({backend, coverage::FactKind::Form, n->op + " " + forms.substr(p, q - p), index});
            p = q + 1;
          }
        }
      }
    }
  }
  return facts;
}

void open_coverage(store::Store& store, coverage::Coverage& cov, const std::vector<worker::BackendSpec>& backends,
                   WorkerSet& workers) {
  cov.add(store.coverage());
  std::set<std::string> probed;
  for (const auto& f : cov.functionality()) probed.insert(f.backend);
  for (size_t i = 0; i < backends.size() && i < workers.size(); ++i) {
    const std::string name = backends[i].str();
    if (probed.count(name)) continue;
    std::vector<coverage::Fact> facts;
    for (const auto& op : mapped_operators(workers.at(i))) facts.push_back({name, coverage::FactKind::Maps, op, -1});
    store.record_coverage(cov.add(facts));
  }
}

}  // namespace quorum::campaign
