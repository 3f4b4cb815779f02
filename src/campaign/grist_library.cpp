// GRIST's library target.
#include "campaign/grist_library.h"

namespace quorum::campaign {

search::Evaluate library_evaluate(const ir::Graph& g, const core::Tensor& target, const Setup& setup,
                                  WorkerSet& workers, std::optional<SearchHit>& hit) {
  return [&g, target, &setup, &workers, &hit](const search::Candidate& c, const ref::VulnerableSite*) {
    ModelCase m{search::with_weights(g, c.weights), c.inputs, target};
    Evaluation ev = evaluate(m, setup, workers);
    for (const auto& f : ev.findings) {
      if (f.kind != oracle::Kind::NaN) continue;
      search::Verdict v{true, f.backend + ": " + f.detail};
      if (!hit) hit = SearchHit{std::move(m), std::move(ev), f};
      return v;
    }
    return search::Verdict{};
  };
}

}  // namespace quorum::campaign
