// The share policy.
#include "gen/targets.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>

#include "core/error.h"
#include "gen/factories.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace quorum::gen {

std::vector<size_t> targets_of(uint64_t seed, uint64_t index, const TargetPolicy& p) {
  if (p.targets.empty() || p.share <= 0) return {};
  core::Rng rng = core::Rng(seed).derive("target:" + std::to_string(index));
  const double u = rng.uniform();
  if (u >= p.share) return {};
  std::vector<size_t> all(p.targets.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  if (u < p.share / 2 || all.size() == 1) return all;
  return {rng.index(all.size())};
}

Model generate_for(const GenOptions& opt, const data::Source& source, uint64_t index, core::Rng& rng,
                   const TargetPolicy& p, const std::vector<size_t>& which) {
  if (which.empty()) return make_generator(opt, source)->generate(index, rng);
  // Quantized models (--dtype int8): the unit generator places the quantized operators, the others float layers
  // that finish_model quantizes; make_unrestricted below does not mark them, so the draw does.
  std::vector<const ops::OpSpec*> placeable = layer_operators();
  if (opt.quantized)
    for (const ops::OpSpec* s : ops::catalogue().all())
      if (s->is_quantized) placeable.push_back(s);
  // The operators every chosen target maps.
  std::set<std::string> mapped(p.targets.at(which[0]).ops.begin(), p.targets.at(which[0]).ops.end());
  for (size_t k = 1; k < which.size(); ++k) {
    const auto& ops = p.targets.at(which[k]).ops;
    const std::set<std::string> other(ops.begin(), ops.end());
    std::set<std::string> both;
    std::set_intersection(mapped.begin(), mapped.end(), other.begin(), other.end(), std::inserter(both, both.end()));
    mapped = std::move(both);
  }
  std::optional<Model> last;
  std::string held;
  for (int d = 0; d < kTargetDraws; ++d) {
    GenOptions t = opt;
    t.only_ops.clear();
    for (const ops::OpSpec* s : placeable)
      if (mapped.count(s->name) && op_allowed(opt, s->name)) t.only_ops.push_back(s->name);
    // Targets that map none of the layers the generator could place: a free model.
    if (t.only_ops.empty()) return make_generator(opt, source)->generate(index, rng);
    t.skip_ops.clear();
    t.limits.glue.assign(mapped.begin(), mapped.end());
    Model m = make_unrestricted(t, source)->generate(index, rng);
    m.quantize = opt.quantized;
    bool allowed = true, inside = true;
    for (const auto& n : m.graph.nodes) {
      if (!op_allowed(opt, n.op)) {
        allowed = false;
        held = n.op;
      }
      inside = inside && mapped.count(n.op);
    }
    if (!allowed) continue;
    bool taken = inside;
    if (taken) {
      // The targets judge the model with its weights (drawn as finish_model will: the stream's own
      // derive("weights"), whatever generation consumed) and every value typed, as the backends see it
      // when it runs. What one refuses is left out of the next draws; a draw that does not validate is
      // drawn again.
      core::Rng wr = rng.derive("weights");
      ir::Graph graph = materialize(Model(m), wr);
      try {
        ir::validate(graph, "model " + std::to_string(index));
      } catch (const core::UserError&) {
        last = std::move(m);
        continue;
      }
      if (p.refuses)
        for (const auto& ops : p.refuses(graph, which))
          for (const auto& op : ops) {
            taken = false;
            mapped.erase(op);
          }
    }
    if (taken) return m;
    last = std::move(m);
  }
  if (last) return std::move(*last);
  throw core::UserError("model " + std::to_string(index) + ": holds operator '" + held +
                        "', which --ops/--skip_ops leave out, in " + std::to_string(kTargetDraws) + " draws");
}

}  // namespace quorum::gen
