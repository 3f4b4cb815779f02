// quorum: the command-line entry point. Commands are rows of one table; each names the flags it
// takes (declared once in flags.def). A user's mistake prints one line and exits 2.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/stats.h"
#include "data/values.h"
#include "ir/json_io.h"
#include "ops/materialize.h"
#include "ops/registry.h"
#include "ref/interpreter.h"

namespace quorum::cli {


namespace {

using core::UserError;

struct Command {
  std::string name;
  std::string usage;
  std::string summary;
  std::vector<std::string> flags;
  std::function<int(const Options&)> run;
};

const std::vector<Command>& commands();

std::string fmt(double v) {
  std::ostringstream os;
  os << std::setprecision(5) << v;
  return os.str();
}

// ---- quorum ops ------------------------------------------------------------------------------

std::string domain_text(const ops::AttrSpec& a) {
  std::string s;
  if (!a.choices.empty()) {
    for (const auto& c : a.choices) s += (s.empty() ? "" : "|") + core::to_string(c);
    s = "{" + s + "}";
  } else if (a.kind != core::AttrKind::String) {
    auto bound = [](double d) { return std::isinf(d) ? std::string(d > 0 ? "inf" : "-inf") : fmt(d); };
    s = "[" + bound(a.lo) + ", " + bound(a.hi) + "]";
  } else {
    s = "any";
  }
  if (!a.invalid.empty()) {
    std::string inv;
    for (const auto& v : a.invalid) inv += (inv.empty() ? "" : " ") + core::to_string(v);
    s += "  invalid: " + inv;
  }
  return s;
}

int cmd_ops(const Options& o) {
  const auto all = ops::catalogue().all();
  std::string family;
  for (const ops::OpSpec* s : all) {
    if (s->family != family) {
      family = s->family;
      std::cout << "\n[" << family << "]\n";
    }
    const std::string arity = s->min_inputs == s->max_inputs
                                  ? std::to_string(s->min_inputs)
                                  : std::to_string(s->min_inputs) + ".." +
                                        (s->max_inputs == ops::kUnbounded ? "n" : std::to_string(s->max_inputs));
    // Parameter names come from the shape rule of one sampled case.
    core::Rng rng(1);
    ops::Case c = s->sample(rng);
    std::string params;
    for (const auto& p : s->infer(c.inputs, ops::canonical_attrs(*s, c.attrs)).params)
      params += (params.empty() ? "" : ",") + p.name;
    std::cout << "  " << std::left << std::setw(22) << s->name << " in " << std::setw(5) << arity
              << (s->multi_input() ? "MI " : "SI ") << (s->differentiable() ? "grad " : "     ")
              << (params.empty() ? "" : "params " + params + "  ") << "- " << s->doc << "\n";
    for (const auto& a : s->attrs) {
      std::cout << "      " << a.name << ": " << core::to_string(a.kind) << " = " << core::to_string(a.default_value)
                << "  " << domain_text(a);
      if (o.verbose && !a.doc.empty()) std::cout << "  (" << a.doc << ")";
      std::cout << "\n";
    }
    if (o.verbose)
      for (const auto& r : s->valid_ranges)
        std::cout << "      valid range: input " << r.input << " in " << (r.lo_inclusive ? "[" : "(") << fmt(r.lo)
                  << ", " << fmt(r.hi) << (r.hi_inclusive ? "]" : ")") << " - " << r.why << "\n";
  }
  std::cout << "\n" << all.size() << " operators\n";
  return 0;
}

// ---- quorum run ------------------------------------------------------------------------------

ref::ValueMap load_inputs(const ir::Graph& g, const Options& o, core::Rng& rng) {
  ref::ValueMap m;
  if (o.inputs == "random") {
    data::complete_inputs(g, m, rng);
    return m;
  }
  for (const auto& in : g.inputs) {
    const std::string path = o.inputs + "/" + in.name + ".npy";
    if (!std::filesystem::exists(path))
      throw UserError(path + ": missing input file for graph input '" + in.name + "'");
    core::Tensor t = core::read_npy(path);
    if (t.shape() != in.type.shape)
      throw UserError(path + ": shape " + core::to_string(t.shape()) + ", graph input '" + in.name + "' wants " +
                      core::to_string(in.type.shape));
    m.emplace(in.name, std::move(t));
  }
  return m;
}

core::Tensor load_target(const ir::Graph& g, const Options& o, const ops::OpSpec& loss, core::Rng& rng) {
  const core::TensorType& out = g.types.at(g.outputs[0]);
  if (o.target != "random") {
    core::Tensor t = core::read_npy(o.target);
    if (t.shape() != out.shape)
      throw UserError(o.target + ": target shape " + core::to_string(t.shape()) + " differs from output " +
                      core::to_string(out.shape));
    return t;
  }
  // Drawn the way the loss expects it (probabilities, one-hot, ...), as a campaign draws it.
  return data::loss_target(loss.name, out.shape, rng);
}

void print_row(const std::string& name, const std::string& op, const core::Tensor& t) {
  const core::TensorStats s = core::stats_of(t);
  std::cout << "  " << std::left << std::setw(18) << name << std::setw(16) << op << std::setw(18)
            << core::to_string(t.shape()) << std::right << std::setw(12) << fmt(s.min) << std::setw(12) << fmt(s.max)
            << std::setw(12) << fmt(s.mean) << std::setw(6) << s.nan << std::setw(6) << s.inf << "\n";
}

void print_header(const std::string& title) {
  std::cout << title << "\n  " << std::left << std::setw(18) << "value" << std::setw(16) << "op" << std::setw(18)
            << "shape" << std::right << std::setw(12) << "min" << std::setw(12) << "max" << std::setw(12) << "mean"
            << std::setw(6) << "nan" << std::setw(6) << "inf" << "\n";
}

int cmd_run(const Options& o) {
  if (o.positional.size() != 1) throw UserError("run: expected one MODEL file (quorum run MODEL.json)");
  const std::string& path = o.positional[0];
  ir::Graph g = ir::load_graph(path);
  const uint64_t seed = core::Rng::resolve_seed(o.seed);
  std::cout << "seed: " << seed << "\n";
  core::Rng rng(seed);
  const ops::OpSpec* loss = nullptr;
  if (!o.loss.empty()) {
    loss = &ops::op(o.loss);
    if (!loss->is_loss) throw UserError("--loss: operator '" + o.loss + "' is not a loss");
  }
  if (!o.save.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.save, ec);
    if (ec) throw UserError(o.save + ": cannot create directory: " + ec.message());
  }
  ref::ValueMap inputs = load_inputs(g, o, rng);
  std::cout << "model: " << path << " (" << g.nodes.size() << " nodes, " << g.initializers.size()
            << " initializers)\n";
  if (!o.backends.empty()) {
    if (!loss) return run_on_backends(g, inputs, nullptr, o);
    const core::Tensor target = load_target(g, o, *loss, rng);
    return run_on_backends(g, inputs, &target, o);
  }
  ref::ValueMap values;
  ref::TrainResult tr;
  if (loss) {
    const core::Tensor target = load_target(g, o, *loss, rng);
    tr = ref::train(g, inputs, target, ref::LossSpec{o.loss, {}});
    values = tr.values;
    if (!o.save.empty()) core::write_npy(o.save + "/target.npy", target);
  } else {
    values = ref::forward(g, inputs);
  }
  print_header("forward (float64 reference):");
  for (const auto& in : g.inputs) print_row(in.name, "input", values.at(in.name));
  for (const auto& n : g.nodes)
    for (const auto& out : n.outputs) print_row(out, n.op, values.at(out));
  if (loss) {
    std::cout << "loss (" << o.loss << "): " << std::setprecision(10) << tr.loss << "\n";
    print_header("gradients of the loss:");
    for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it)
      for (const auto& out : it->outputs)
        if (tr.grads.count(out)) print_row(out, it->op, tr.grads.at(out));
    for (const auto& [name, t] : g.initializers)
      if (tr.grads.count(name)) print_row(name, "weight", tr.grads.at(name));
    for (const auto& in : g.inputs)
      if (tr.grads.count(in.name)) print_row(in.name, "input", tr.grads.at(in.name));
  }
  if (!o.save.empty()) {
    for (const auto& [name, t] : values) core::write_npy(o.save + "/" + name + ".npy", t);
    for (const auto& [name, t] : tr.grads) core::write_npy(o.save + "/grad." + name + ".npy", t);
    std::cout << "saved: " << o.save << "\n";
  }
  return 0;
}

// ---- help ------------------------------------------------------------------------------------

int cmd_help(const Options&) {
  std::cout << "quorum " << QUORUM_VERSION
            << " - differential testing of deep-learning libraries against a float64 reference\n\n"
            << "usage: quorum COMMAND [ARGS] [FLAGS]\n       quorum COMMAND --help\n\ncommands:\n";
  size_t width = 0;
  for (const auto& c : commands()) width = std::max(width, c.usage.size());
  for (const auto& c : commands())
    std::cout << "  " << std::left << std::setw(static_cast<int>(width + 2)) << c.usage << c.summary << "\n";
  std::cout << "\nexit codes: 0 success, 2 bad input, 1 any other failure (a full disk, an internal error); "
               "one line on stderr names the problem\n";
  return 0;
}

int cmd_version(const Options&) {
  std::cout << "quorum " << QUORUM_VERSION << "\n";
  return 0;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> c = {
      {"run",
       "run MODEL.json",
       "run a model on the float64 reference (per-node summary), or compare backends",
       {"inputs", "seed", "loss", "target", "save", "backends", "timeout", "memory", "threads", "dtype"},
       cmd_run},
      {"backends",
       "backends",
       "list backends: library version, training, operators supported",
       {"verbose", "timeout", "memory"},
       cmd_backends},
      {"worker",
       "worker --backend NAME [OPT...]",
       "serve one backend over the worker protocol (stdin/stdout)",
       {"backend"},
       cmd_worker},
      {"gen",
       "gen --generator G --count N --out DIR",
       "generate models (JSON) with a named generator; with --seed S --index I: campaign model I, inputs, target",
       {"generator", "count", "seed", "out", "max_nodes", "dataset", "invalid_params", "mutation_rate", "model",
        "index", "loss", "ops", "skip_ops", "olc_weights", "n_maxspc", "mcts_visits", "mcts_depth", "backends",
        "backend_share", "muffin_epoch", "timeout", "memory", "dtype"},
       cmd_gen},
      {"fuzz",
       "fuzz --backends LIST --time 10m|--models N | fuzz --generator zoo --trained DIR --backends LIST [--models N]",
       "a fuzz campaign: generate, run, compare, store findings",
       {"#the campaign", "generator", "backends", "mode", "time", "models", "jobs", "seed", "out", "store", "shard",
        "dtype", "loss", "learning_rate", "reduce",
        "#the models drawn", "max_nodes", "dataset", "invalid_params", "mutation_rate", "model", "ops", "skip_ops",
        "mcts_visits", "mcts_depth", "backend_share", "muffin_epoch",
        "#judging", "oracle", "threshold", "epsilon", "metric", "optimized", "batch_relation", "form_relation",
        "position_relation",
        "#the workers", "timeout", "memory", "threads", "worker_models", "worker_rss",
        "#searching each model (--search)", "search", "search_budget", "population", "elite", "crossover",
        "ga_mutation", "ga_operators", "max_ite", "cauchy_scale", "level", "fitness", "stop_at",
        "#known bugs", "transfer",
        "#trained models (--generator zoo --trained DIR)", "trained", "images", "eval_batch", "mutant_noise", "top_k",
        "class_threshold", "mad_threshold", "trigger_share",
        "#coverage", "olc_weights", "n_maxspc"},
       cmd_fuzz},
      {"detect",
       "detect MODEL --dataset fashion-mnist --backends LIST [--images N]",
       "CRADLE's detection on a trained model: the validation set on every library and the float64 reference, "
       "class and MAD distances per pair, unique inconsistencies, label changes, each localized and judged per node",
       {"backends", "dataset", "images", "eval_batch", "top_k", "class_threshold", "mad_threshold", "trigger_share",
        "out", "store", "seed", "reduce", "timeout", "memory", "threads", "dtype", "oracle"},
       cmd_detect},
      {"coverage",
       "coverage CAMPAIGN [--store URL] [--ops LIST|all]",
       "a campaign's operator-level coverage (OTC, IDC, ODC, SEC, SPC, OLC), over time, and per backend",
       {"store", "ops", "olc_weights", "n_maxspc"},
       cmd_coverage},
      {"search",
       "search --method ga|diverge|grist|random --model MODEL.json|MODEL.onnx|BUNDLE --backends LIST [--budget N]",
       "search one model's inputs and/or weights for a failure (Audee's genetic search, divergence seeking, "
       "GRIST's gradient-guided NaN/Inf); writes it as a bundle",
       {"method",  "model",  "backends",   "budget",     "level",    "fitness",     "population", "elite",
        "crossover", "ga_mutation", "ga_operators", "max_ite", "cauchy_scale", "stop_at", "seed", "out", "mode",
        "dtype", "threads", "loss",
        "learning_rate", "threshold", "epsilon", "metric", "oracle", "timeout", "memory", "expose", "time", "delta",
        "switch_rate", "weights", "data_range", "baseline"},
       cmd_search},
      {"merge",
       "merge A B ... -o C",
       "merge shards' campaign stores and bundles into the new campaign C (hits summed, root causes re-merged)",
       {"output"},
       cmd_merge},
      {"replay", "replay BUNDLE", "rerun a finding's bundle and say whether it reproduces", {}, cmd_replay},
      {"export",
       "export MODEL -o FILE.onnx [--opset N] [--form_seed S]",
       "write a model as ONNX (opsets 11 to 17; a seeded exchange form with --form_seed)",
       {"output", "opset", "form_seed"},
       cmd_export},
      {"conformance",
       "conformance [--backends LIST] [--output FILE.md]",
       "run the ONNX conformance suite on the reference and backends: operator x backend table",
       {"backends", "suite", "filter", "output", "timeout", "memory"},
       cmd_conformance},
      {"known",
       "known [--check [--out DIR]] [--backends LIST] [--filter ID]",
       "the known-issue ledgers: list the entries, or re-run each minimal case and report stale ones",
       {"check", "ledger", "backends", "filter", "out", "timeout", "memory"},
       cmd_known},
      {"transfer",
       "transfer [--backends LIST] [--out DIR] [--filter ID] [--no_siblings]",
       "every known-issue ledger case on every library and with its operator's siblings; new findings into DIR",
       {"backends", "out", "filter", "ledger", "no_siblings", "seed", "verbose", "timeout", "memory"},
       cmd_transfer},
      {"reduce",
       "reduce BUNDLE|CAMPAIGN [--max_runs N] [--verbose]",
       "the smallest model that still shows a finding (BUNDLE/reduced/) and the parameters that cause it",
       {"max_runs", "verbose", "timeout", "memory"},
       cmd_reduce},
      {"repro",
       "repro BUNDLE|CAMPAIGN [-o DIR]",
       "a standalone program in the blamed library's own API that shows the finding (BUNDLE/repro/)",
       {"output"},
       cmd_repro},
      {"report",
       "report CAMPAIGN [--store URL] [-o report.html] | report BUNDLE --issue [-o FILE.md]",
       "the HTML campaign report (CAMPAIGN/report.html), or one finding as issue-ready Markdown",
       {"output", "issue", "store", "olc_weights", "n_maxspc"},
       cmd_report},
      {"train",
       "train MODEL [--backend torch] [--optimizer sgd|adam] [--epochs N] [--out DIR]",
       "train a zoo model on Fashion-MNIST (or sine) through a library; saves model.json + model.onnx",
       {"backend", "optimizer", "learning_rate", "momentum", "beta1", "beta2", "adam_eps", "epochs", "batch", "limit",
        "dataset", "seed", "out", "threads", "timeout", "memory"},
       cmd_train},
      {"train-diff",
       "train-diff MODEL|BUNDLE --backends LIST [--steps K] [--optimizer sgd|adam]",
       "the same training steps on every library and the float64 reference: loss, weight drift, the diverging step",
       {"backends", "steps", "optimizer", "learning_rate", "momentum", "beta1", "beta2", "adam_eps", "batch", "seed",
        "f32_factor", "out", "threads", "timeout", "memory"},
       cmd_train_diff},
      {"calibrate",
       "calibrate --output FILE [--backends LIST] [--count N]",
       "measure every operator's agreement on the libraries; write the calibrated float32 tolerance table",
       {"backends", "count", "output", "timeout", "memory"},
       cmd_calibrate},
      {"ops", "ops", "list every operator with arity, attributes and domains", {"verbose"}, cmd_ops},
      {"version", "version | --version", "print the version", {}, cmd_version},
      {"help", "help | --help", "this text", {}, cmd_help},
  };
  return c;
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    cmd_help({});
    return 2;
  }
  std::string name = args[0];
  if (name == "--version" || name == "-V") name = "version";
  if (name == "--help" || name == "-h") name = "help";
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end()) {
      std::cout << "usage: quorum " << c.usage << "\n" << c.summary << "\n" << flag_help(c.flags);
      return 0;
    }
    Options o = parse_flags(rest, c.flags, c.name);
    o.command_line = "quorum";
    for (const auto& a : args) o.command_line += " " + a;
    return c.run(o);
  }
  throw UserError("unknown command '" + name + "' (see quorum --help)");
}

}  // namespace
}  // namespace quorum::cli

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return quorum::cli::dispatch(args);
  } catch (const quorum::core::UserError& e) {
    std::cout.flush();
    std::cerr << "quorum: " << e.what() << std::endl;
    return 2;
  } catch (const quorum::core::SystemError& e) {
    // A full disk (or a file system refusing writes): not the user's input, not a Quorum bug.
    std::cout.flush();
    std::cerr << "quorum: " << e.what() << std::endl;
    return 1;
  } catch (const std::bad_alloc&) {
    // Every escaping exception is one line: Quorum's own failures exit 1 (bad input exits 2 above).
    std::cout.flush();
    std::cerr << "quorum: out of memory" << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "quorum: internal error: " << e.what() << std::endl;
    return 1;
  }
}
