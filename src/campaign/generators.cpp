// Generator glue.
#include "campaign/generators.h"

#include <memory>

namespace quorum::campaign {

ModelFactory generator_factory(const gen::GenOptions& opt, const std::string& dataset) {
  std::shared_ptr<const data::Source> source = data::open_source(dataset);
  gen::make_generator(opt, *source);  // validates the name and options now
  return [opt, source](int64_t index, core::Rng& rng) {
    const auto g = gen::make_generator(opt, *source);
    gen::Generated out = gen::finish_model(g->generate(static_cast<uint64_t>(index), rng), rng, *source);
    ModelCase m;
    m.graph = std::move(out.graph);
    ir::validate(m.graph, "model " + std::to_string(index));  // types every value; an invalid model is skipped
    m.inputs = std::move(out.inputs);
    m.target = std::move(out.target);
    return m;
  };
}

}  // namespace quorum::campaign
