// The model factory behind --generator (glue between the CLI and src/gen/).
#include "cli/commands.h"
#include "core/error.h"
#include "ir/build.h"
#include "ops/registry.h"

namespace quorum::cli {

campaign::ModelFactory model_factory(const Options& o) {
  if (o.generator == "unit") {
    // One operator per model, cycling the catalogue (losses excluded: the campaign adds its own).
    std::vector<const ops::OpSpec*> specs;
    for (const ops::OpSpec* s : ops::catalogue().all())
      if (!s->is_loss) specs.push_back(s);
    return [specs](int64_t index, core::Rng& rng) {
      const ops::OpSpec& spec = *specs[static_cast<size_t>(index) % specs.size()];
      campaign::ModelCase m;
      m.graph = ir::single_node_graph(spec, spec.sample(rng), rng).graph;
      return m;
    };
  }
  throw core::UserError("unknown generator '" + o.generator + "'");
}

}  // namespace quorum::cli
