// quorum detect: CRADLE's detection on one trained model (campaign/trained_detection.h), and fuzz --trained.
#include <filesystem>
#include <iostream>

#include "campaign/bundle.h"
#include "campaign/trained_detection.h"
#include "cli/commands.h"
#include "core/error.h"
#include "ir/json_io.h"
#include "report/html.h"

namespace quorum::cli {

using core::UserError;

campaign::DetectOptions detect_options_of(const Options& o) {
  if (o.dataset != "random" && o.dataset != "fashion-mnist")
    throw UserError("--dataset " + o.dataset + ": detection runs on fashion-mnist (the trained models' data)");
  if (o.images < 1) throw UserError("--images: at least 1");
  if (o.top_k < 1 || o.top_k > 30) throw UserError("--top_k: from 1 to 30");
  campaign::DetectOptions opt;
  opt.setup = setup_of(o);
  opt.setup.mode = campaign::Mode::Infer;
  opt.thresholds.k = static_cast<int>(o.top_k);
  opt.thresholds.class_t = o.class_threshold;
  opt.thresholds.mad_t = o.mad_threshold;
  opt.thresholds.p = o.trigger_share;
  opt.batch = o.eval_batch ? static_cast<int64_t>(o.eval_batch) : 100;
  opt.reduce_runs = static_cast<int>(o.reduce);
  opt.seed = o.seed;
  opt.command_line = o.command_line;
  // Library versions, for the bundles (and to fail early on a broken backend).
  campaign::WorkerSet probe(opt.setup.backends, opt.setup.limits);
  for (size_t i = 0; i < probe.size(); ++i) {
    worker::BackendInfo info;
    const worker::Outcome r = probe.at(i).hello(info);
    opt.versions[opt.setup.backends[i].str()] = r.ok() ? info.version : "unavailable: " + r.str();
  }
  return opt;
}

int cmd_detect(const Options& o) {
  if (o.positional.size() != 1) throw UserError("detect: expected one MODEL (model.json or model.onnx)");
  campaign::DetectOptions opt = detect_options_of(o);
  opt.out = o.out.empty() ? "detect" : o.out;
  opt.model_path = o.positional[0];
  if (opt.seed == 0) opt.seed = core::Rng::resolve_seed(0);
  const ir::Graph g = ir::load_graph(opt.model_path);
  if (g.inputs.empty()) throw UserError(opt.model_path + ": the model has no input");
  const data::Validation v =
      data::fashion_mnist_validation(data::fashion_mnist_dir(), static_cast<int64_t>(o.images), g.inputs[0].type.shape);
  const std::unique_ptr<store::Store> store = store::open_store(o.store, opt.out);
  campaign::clean_partial_bundles(opt.out);
  // Each run of detect is one model of the store: the next index.
  const int64_t index = store->models_done();
  campaign::WorkerSet workers(opt.setup.backends, opt.setup.limits);
  const campaign::Detection d = campaign::detect_model(g, v, opt, workers, store.get(), index, &std::cerr);
  campaign::print_detection(d, std::cout);
  const std::string html = opt.out + "/report.html";
  report::write_campaign_report(opt.out, html, o.store);
  std::cout << "store: " << store->where() << "\nreport: " << std::filesystem::absolute(html).string() << "\n";
  return 0;
}

int fuzz_trained(const Options& o) {
  if (o.generator != "zoo") throw UserError("--trained: use --generator zoo (trained models are zoo architectures)");
  campaign::DetectOptions opt = detect_options_of(o);
  opt.out = o.out.empty() ? "campaign" : o.out;
  campaign::TrainedCampaign tc;
  tc.dir = o.trained;
  tc.images = static_cast<int64_t>(o.images);
  tc.models = static_cast<int64_t>(o.models);
  tc.time_s = o.time;
  tc.mutation_rate = o.mutant_noise;
  tc.store = o.store;
  const int64_t ran = campaign::run_trained_campaign(tc, opt, std::cout);
  const std::unique_ptr<store::Store> store = store::open_store(o.store, opt.out);
  std::cout << "\nsummary: " << ran << " trained models and mutants through detection; " << store->findings().size()
            << " unique findings in " << store->where() << "\n";
  for (const auto& f : store->findings())
    std::cout << "  " << f.hits << "x  " << core::to_string(f.kind) << " [" << core::to_string(f.stage) << "] "
              << f.backend << " " << f.op << (f.node.empty() ? "" : " at '" + f.node + "'")
              << "\n          replay: " << campaign::replay_command(f.bundle) << "\n";
  const std::string html = opt.out + "/report.html";
  report::write_campaign_report(opt.out, html, o.store);
  std::cout << "report: " << std::filesystem::absolute(html).string() << "\n";
  return 0;
}

}  // namespace quorum::cli
