// quorum gen: generate models with a named generator, write each as JSON (with a batch of data
// beside it), check each (IR validation, then the float64 reference) and print a summary.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "gen/generator.h"
#include "ir/json_io.h"

namespace quorum::cli {

using core::UserError;

namespace {

std::string model_stem(const std::string& dir, uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "model_%05llu", static_cast<unsigned long long>(i));
  return dir + "/" + buf;
}

}  // namespace

int cmd_gen(const Options& o) {
  if (!o.positional.empty()) throw UserError("gen: unexpected argument '" + o.positional[0] + "'");
  if (o.out.empty()) throw UserError("gen: --out DIR is required");
  if (o.count == 0) throw UserError("gen: --count must be at least 1");
  if (o.max_nodes == 0) throw UserError("gen: --max_nodes must be at least 1");
  gen::GenOptions opt;
  opt.generator = o.generator;
  opt.max_nodes = static_cast<int>(std::min<uint64_t>(o.max_nodes, 1000));
  opt.invalid_params = o.invalid_params;
  opt.mutation_rate = o.mutation_rate;
  if (o.invalid_params && o.generator != "zoo")
    throw UserError("gen: --invalid_params applies to the zoo generator only");
  if (!o.model.empty()) {
    if (o.generator != "mutate") throw UserError("gen: --model is the seed model of the mutate generator");
    opt.seed_models.push_back(ir::load_graph(o.model));
  }
  const auto source = data::open_source(o.dataset);
  opt.seed = core::Rng::resolve_seed(o.seed);
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
    const std::string stem = model_stem(o.out, i);
    ir::save_graph(stem + ".json", g.graph);
    // The batch beside it: quorum run MODEL.json --inputs MODEL.data [--loss L --target MODEL.data/target.npy]
    std::filesystem::create_directories(stem + ".data", ec);
    if (ec) throw UserError(stem + ".data: cannot create directory: " + ec.message());
    for (const auto& [name, t] : g.inputs) core::write_npy(stem + ".data/" + name + ".npy", t);
    if (g.target.defined()) core::write_npy(stem + ".data/target.npy", g.target);
  }
  std::cout << summary.text(stream.generator().operators());
  std::cout << "written: " << o.out << "/model_NNNNN.json (+ .data/ with the inputs and target)\n";
  return 0;
}

}  // namespace quorum::cli
