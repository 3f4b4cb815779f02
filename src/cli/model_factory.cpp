// The model factory behind --generator: the generators of src/gen/ with the command's options.
#include <algorithm>
#include <sstream>

#include "campaign/model_source.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/json_io.h"
#include "ops/registry.h"
#include "worker/supervisor.h"

namespace quorum::cli {

namespace {

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

void restrict_ops(const Options& o, gen::GenOptions& opt) {
  opt.only_ops = comma_list(o.ops);
  opt.skip_ops = comma_list(o.skip_ops);
  for (const auto* list : {&opt.only_ops, &opt.skip_ops})
    for (const auto& op : *list)
      if (!ops::catalogue().find(op))
        throw core::UserError(std::string(list == &opt.only_ops ? "--ops" : "--skip_ops") + ": '" + op +
                              "' is not a catalogue operator (quorum ops lists them)");
}

core::DType compute_dtype(const Options& o, bool* quantized) {
  if (quantized) *quantized = o.dtype == "int8";
  if (o.dtype == "int8") return core::DType::F32;
  if (o.dtype != "float32" && o.dtype != "f32" && o.dtype != "float64" && o.dtype != "f64")
    throw core::UserError("--dtype: expected float32, float64 or int8 (quantized models), got '" + o.dtype + "'");
  return core::dtype_from_string(o.dtype);
}

coverage::CoverageOptions coverage_options(const Options& o) {
  coverage::CoverageOptions c;
  coverage::parse_weights(o.olc_weights, c);
  if (o.n_maxspc == 0 || o.n_maxspc > 1000000) throw core::UserError("--n_maxspc: from 1 to 1000000");
  c.n_maxspc = static_cast<int64_t>(o.n_maxspc);
  return c;
}

void mcts_options(const Options& o, gen::GenOptions& opt) {
  if (o.mcts_visits == 0 || o.mcts_visits > 1000) throw core::UserError("--mcts_visits: from 1 to 1000");
  if (o.mcts_depth == 0 || o.mcts_depth > 1000) throw core::UserError("--mcts_depth: from 1 to 1000");
  opt.mcts_visits = static_cast<int>(o.mcts_visits);
  opt.mcts_depth = static_cast<int>(o.mcts_depth);
}

campaign::ModelFactory model_factory(const Options& o, campaign::CampaignOptions* campaign) {
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
  restrict_ops(o, opt);
  mcts_options(o, opt);
  compute_dtype(o, &opt.quantized);
  opt.seed = o.seed;  // gen --index: the campaign's; a campaign tells its own (CampaignOptions::on_seed)
  campaign::DrawOptions draw;
  draw.backend_share = o.backend_share;
  draw.muffin_epoch = static_cast<int64_t>(std::min<uint64_t>(o.muffin_epoch, 1000000000));
  if (campaign) {
    draw.backends = campaign->setup.backends;
    draw.limits = campaign->setup.limits;
    campaign->draw_settings = {{"backend_share", std::to_string(draw.backend_share)},
                               {"muffin_epoch", std::to_string(draw.muffin_epoch)}};
  } else if (draw.backend_share > 0) {
    // gen --index: the campaign's backends (fuzz's default when none are given), asked as it asks them.
    draw.backends = campaign::parse_backends(o.backends.empty() ? "torch,onednn" : o.backends);
    for (const auto& b : draw.backends) worker::worker_path(b.name);  // UserError naming the built ones
    draw.limits = limits_of(o);
  }
  return campaign::generator_factory(opt, o.dataset, campaign, draw);
}

}  // namespace quorum::cli
