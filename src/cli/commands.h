// Subcommands implemented outside main.cpp.
#pragma once
#include "cli/options.h"
#include "ir/graph.h"
#include "campaign/campaign.h"
#include "campaign/search_case.h"
#include "gen/generator.h"
#include "ref/interpreter.h"
#include "worker/supervisor.h"

namespace quorum::cli {

int cmd_backends(const Options& o);
int cmd_worker(const Options& o);
int cmd_gen(const Options& o);
int cmd_fuzz(const Options& o);
int cmd_replay(const Options& o);
int cmd_merge(const Options& o);
int cmd_export(const Options& o);
int cmd_conformance(const Options& o);
int cmd_known(const Options& o);
int cmd_transfer(const Options& o);
int cmd_calibrate(const Options& o);
int cmd_reduce(const Options& o);
int cmd_repro(const Options& o);
int cmd_report(const Options& o);
// quorum detect (detect_command.cpp): CRADLE's detection on one trained model.
int cmd_detect(const Options& o);
// fuzz --trained DIR: the trained models and their weight mutants through detection.
int fuzz_trained(const Options& o);
// `quorum train` and `quorum train-diff` (train_command.cpp): training on real data, multi-step divergence.
int cmd_train(const Options& o);
int cmd_train_diff(const Options& o);
// The campaign settings of --backends, --mode, --dtype, --loss, --oracle, ... (fuzz, search).
campaign::Setup setup_of(const Options& o);
// A search method and the genetic search's flags (--population, --elite, ...) with `budget` evaluations.
campaign::SearchOptions search_options_of(const Options& o, const std::string& method, uint64_t budget);
int cmd_search(const Options& o);
// One line per known failure a search went past (--stop_at): "met: ID at evaluation N".
void print_met(const std::vector<search::Met>& met, const std::string& stop_at);
// `quorum search --method grist` (grist_command.cpp): GRIST's gradient-guided NaN/Inf search.
int cmd_grist(const Options& o);
// The worker limits --timeout, --memory, --worker_models and --worker_rss give.
worker::Limits limits_of(const Options& o);
// --ops / --skip_ops into the generator options (UserError for an operator not in the catalogue).
void restrict_ops(const Options& o, gen::GenOptions& opt);
// --dtype: the precision the libraries compute in (float32 or float64; int8, quantized models, computes
// their float parts in float32); UserError naming the choices otherwise. `quantized`: whether it is int8.
core::DType compute_dtype(const Options& o, bool* quantized = nullptr);
// The model factory of the generator named by --generator (with --max_nodes, --dataset, ...).
// `campaign`: the campaign it is for (a learning generator, mcts, reads its coverage: campaign/model_source.h).
campaign::ModelFactory model_factory(const Options& o, campaign::CampaignOptions* campaign = nullptr);
// --olc_weights and --n_maxspc.
coverage::CoverageOptions coverage_options(const Options& o);
// --mcts_visits and --mcts_depth into the generator options.
void mcts_options(const Options& o, gen::GenOptions& opt);
// `quorum coverage CAMPAIGN` (coverage_command.cpp).
int cmd_coverage(const Options& o);
// `quorum run --backends ...`: runs the model on each backend's worker (and, given a target, one
// training step) and prints, per node, each backend's difference from the float64 reference, the
// outcomes, and what the oracles find.
int run_on_backends(const ir::Graph& g, const ref::ValueMap& inputs, const core::Tensor* target, const Options& o);

}  // namespace quorum::cli
