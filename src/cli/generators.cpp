// The model factory behind --generator: the generators of src/gen/ with the command's options.
#include "campaign/generators.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/json_io.h"

namespace quorum::cli {

campaign::ModelFactory model_factory(const Options& o) {
  gen::GenOptions opt;
  opt.generator = o.generator;
  if (o.max_nodes == 0) throw core::UserError("--max_nodes must be at least 1");
  opt.max_nodes = static_cast<int>(std::min<uint64_t>(o.max_nodes, 1000));
  opt.invalid_params = o.invalid_params;
  if (o.invalid_params && o.generator != "zoo")
    throw core::UserError("--invalid_params applies to the zoo generator only");
  if (!o.model.empty()) {
    if (o.generator != "mutate") throw core::UserError("--model is the seed model of the mutate generator");
    opt.seed_models.push_back(ir::load_graph(o.model));
  }
  opt.mutation_rate = o.mutation_rate;
  return campaign::generator_factory(opt, o.dataset);
}

}  // namespace quorum::cli
