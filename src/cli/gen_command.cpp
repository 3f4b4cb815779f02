// quorum gen: generate models with a named generator, write each as JSON (with a batch of data
// beside it), check each (IR validation, then the float64 reference) and print a summary.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "campaign/campaign.h"
#include "campaign/model_source.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "gen/generator.h"
#include "ir/json_io.h"
#include "ops/registry.h"

namespace quorum::cli {

using core::UserError;

namespace {

std::string model_stem(const std::string& dir, uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "model_%05llu", static_cast<unsigned long long>(i));
  return dir + "/" + buf;
}

void write_model(const std::string& stem, const ir::Graph& graph, const ref::ValueMap& inputs,
                 const core::Tensor& target) {
  ir::save_graph(stem + ".json", graph);
  // The batch beside it: quorum run MODEL.json --inputs MODEL.data [--loss L --target MODEL.data/target.npy]
  std::error_code ec;
  std::filesystem::create_directories(stem + ".data", ec);
  if (ec) throw UserError(stem + ".data: cannot create directory: " + ec.message());
  for (const auto& [name, t] : inputs) core::write_npy(stem + ".data/" + name + ".npy", t);
  if (target.defined()) core::write_npy(stem + ".data/target.npy", target);
}

// quorum gen --index I: model I of a campaign with the same seed and options, as it evaluates it
// (the factory and the case completion of campaign::draw_case: a fresh generator, the loss target).
int gen_index(const Options& o) {
  size_t used = 0;
  uint64_t index = 0;
  try {
    index = std::stoull(o.index, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != o.index.size() || o.index.empty() || o.index[0] == '-')
    throw UserError("--index: expected a model index (0, 1, ...), got '" + o.index + "'");
  if (o.seed == 0) throw UserError("gen: --index needs the campaign's --seed");
  if (campaign::generator_learns(o.generator))
    throw UserError("gen: --index: a " + o.generator + " model depends on the models before it and their outcomes; "
                    "generate the stream with --count instead");
  // No --loss: the campaign's rotation (each model its own loss), as fuzz without --loss.
  const std::string loss = o.loss;
  if (!loss.empty() && !ops::op(loss).is_loss) throw UserError("--loss: operator '" + loss + "' is not a loss");
  const campaign::ModelFactory factory = model_factory(o);  // checks the generator options
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) throw UserError(o.out + ": cannot create directory: " + ec.message());
  std::cout << "seed: " << o.seed << "\n"
            << "generator: " << o.generator << ", data set: " << o.dataset << ", index: " << index << "\n";
  campaign::ModelCase m;
  std::string trained_with;
  try {
    m = campaign::draw_case(factory, o.seed, static_cast<int64_t>(index), loss, &trained_with);
  } catch (const std::exception& e) {
    throw UserError("gen: model " + std::to_string(index) + " is invalid (a campaign skips it): " + e.what());
  }
  std::cout << "loss: " << trained_with << "\n";
  const std::string stem = model_stem(o.out, index);
  write_model(stem, m.graph, m.inputs, m.target);
  const gen::Verdict v = gen::check_model(m.graph, m.inputs);
  std::cout << "nodes: " << m.graph.nodes.size() << ", " << (v.valid ? "valid" : "invalid: " + v.reason) << "\n"
            << "written: " << stem << ".json (+ .data/ with the inputs and target)\n";
  return 0;
}

}  // namespace

int cmd_gen(const Options& o) {
  if (!o.positional.empty()) throw UserError("gen: unexpected argument '" + o.positional[0] + "'");
  if (o.out.empty()) throw UserError("gen: --out DIR is required");
  if (!o.index.empty()) return gen_index(o);
  if (o.count == 0) throw UserError("gen: --count must be at least 1");
  if (o.max_nodes == 0) throw UserError("gen: --max_nodes must be at least 1");
  gen::GenOptions opt;
  opt.generator = o.generator;
  opt.max_nodes = static_cast<int>(std::min<uint64_t>(o.max_nodes, 1000));
  opt.invalid_params = o.invalid_params;
  opt.mutation_rate = o.mutation_rate;
  restrict_ops(o, opt);
  compute_dtype(o, &opt.quantized);
  if (o.invalid_params && o.generator != "zoo")
    throw UserError("gen: --invalid_params applies to the zoo generator only");
  if (!o.model.empty()) {
    if (o.generator != "mutate") throw UserError("gen: --model is the seed model of the mutate generator");
    opt.seed_models.push_back(ir::load_graph(o.model));
  }
  const auto source = data::open_source(o.dataset);
  opt.seed = core::Rng::resolve_seed(o.seed);
  mcts_options(o, opt);
  // Coverage of the models written (and the mcts generator's guide): a property of the models alone.
  coverage::Coverage coverage(coverage_options(o));
  opt.feedback = &coverage;
  gen::Stream stream(opt, *source);  // an unknown generator or a bad rate fails here, before any file

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) throw UserError(o.out + ": cannot create directory: " + ec.message());

  std::cout << "seed: " << opt.seed << "\n"
            << "generator: " << opt.generator << ", data set: " << source->name() << ", count: " << o.count << "\n";
  gen::Summary summary;
  for (uint64_t i = 0; i < o.count; ++i) {
    gen::Generated g = stream.next();
    const gen::Verdict v = gen::check_model(g.graph, g.inputs);
    summary.add(g, v);
    coverage.add(coverage::model_facts(g.graph, static_cast<int64_t>(i)));
    write_model(model_stem(o.out, i), g.graph, g.inputs, g.target);
  }
  std::cout << summary.text(stream.generator().operators());
  std::cout << "coverage: " << coverage::parts_line(coverage.parts()) << "\n";
  std::cout << "written: " << o.out << "/model_NNNNN.json (+ .data/ with the inputs and target)\n";
  return 0;
}

}  // namespace quorum::cli
