// GRIST's library target.
#include "campaign/grist_library.h"
#include "ir/edit.h"

namespace quorum::campaign {

search::Evaluate library_evaluate(const ir::Graph& g, const core::Tensor& target, const Setup& setup,
                                  WorkerSet& workers, LibraryHits& hits) {
  return [&g, target, &setup, &workers, &hits](const search::Candidate& c, const ref::VulnerableSite*) {
    ModelCase m{ir::with_weights(g, c.weights), c.inputs, target};
    Evaluation ev = evaluate(m, setup, workers);
    ++hits.evaluations;
    for (const auto& f : ev.findings) {
      if (f.kind != oracle::Kind::NaN) continue;
      if (!hits.stop.stops(f.known)) {
        search::add_met(hits.met, f.known, hits.evaluations);
        if (!hits.first_known) hits.first_known = SearchHit{m, ev, f};
        continue;
      }
      search::Verdict v{true, f.backend + ": " + f.detail};
      if (!hits.hit) hits.hit = SearchHit{std::move(m), std::move(ev), f};
      return v;
    }
    return search::Verdict{};
  };
}

}  // namespace quorum::campaign
