// Reducing a bundle.
#include "campaign/reduce_bundle.h"

#include <chrono>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "campaign/bundle.h"
#include "campaign/search_case.h"
#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "data/values.h"
#include "ir/edit.h"
#include "ir/json_io.h"
#include "ref/interpreter.h"

namespace quorum::campaign {

namespace {

constexpr int kInputSearchTries = 4;  // random input draws for a finding no parameter explains
constexpr int kGeneticBudget = 40;    // evaluations of the genetic search where no random draw shows it

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // as bundles write finding.json

// The part of a finding the reduced case must keep.
bool same_finding(const oracle::Finding& f, const json& want) {
  if (f.kind != core::finding_kind_from_string(want.at("kind").get<std::string>())) return false;
  if (f.stage != core::stage_from_string(want.at("stage").get<std::string>())) return false;
  if (f.backend != want.at("backend").get<std::string>() || f.op != want.at("op").get<std::string>()) return false;
  if (core::info(f.kind).signature == core::SignatureBy::Message)
    return f.message == want.at("message").get<std::string>();
  return true;
}

// Audee's genetic search (src/search/) on the reduced one-node case, from fresh random inputs (as
// search_inputs draws them, with the node's own stream), at most `budget` evaluations: whether it
// finds inputs on which the finding `want` shows. The fitness is the finding kind's (NaN spread for
// NaN findings, else the inconsistency at the output).
void genetic_input_search(BundleReduction& out, const Setup& setup, WorkerSet& workers, core::FindingKind kind,
                          const json& want, int budget, std::ostream* log) {
  const localize::Case& one = out.reduction.reduced;
  ModelCase m{one.graph, {}, one.target};
  core::Rng rng(core::fnv1a("genetic_input_search:" + one.graph.nodes.at(0).name));
  data::complete_inputs(m.graph, m.inputs, rng, 0.0);
  complete_case(m, setup.loss, rng);
  SearchOptions o;
  o.method = SearchMethod::Ga;
  o.ga.population = 10;
  o.ga.elite = 5;
  o.ga.budget = budget;
  o.ga.level = search::Level::Input;
  o.ga.fitness = kind == core::FindingKind::NaN ? search::Fitness::Nan : search::Fitness::Inconsistency;
  try {
    const Searched s = search_case(m, o, setup, workers, rng);
    out.inputs.searched = static_cast<int>(s.result.evaluations);
    if (s.result.found)
      for (const auto& f : s.evaluation.findings) out.inputs.search_shown |= same_finding(f, want);
  } catch (const core::SystemError&) {
    throw;
  } catch (const std::exception& e) {
    if (log) *log << "  genetic input search: " << e.what() << "\n";
  }
  if (log)
    *log << "  genetic input search: " << out.inputs.searched << " evaluations, "
         << (out.inputs.search_shown ? "found inputs that show it" : "nothing else shows it") << "\n";
}

// The reduced case as a bundle of its own, beside the original (BUNDLE/reduced, with reduction.json), when its
// evaluation shows the finding `j` again. Returns that finding's parameters (for the optimized stage, what the
// optimizer did), empty when it did not show.
std::string write_reduced_bundle(BundleReduction& out, const Setup& rsetup, WorkerSet& workers, const json& j,
                                 const std::string& bundle_dir) {
  const fs::path dir(bundle_dir);
  std::string params;
  ModelCase m{out.reduction.reduced.graph, out.reduction.reduced.inputs, out.reduction.reduced.target};
  core::Rng rng(1);
  complete_case(m, rsetup.loss, rng);
  // An intermittent finding (the library's result varies from run to run) gets as many evaluations as the
  // original had before its bundle is given up.
  const int tries = out.reduction.intermittent ? localize::kOriginalTries : 1;
  for (int t = 0; t < tries && out.reduced_dir.empty(); ++t) {
    const Evaluation ev = evaluate(m, rsetup, workers);
    for (const auto& f : ev.findings) {
      if (!same_finding(f, j)) continue;
      params = f.params;
      std::map<std::string, std::string> versions;
      BundleContext ctx{m, ev, rsetup, j.value("seed", uint64_t{0}), j.value("model_index", int64_t{0}),
                        "quorum reduce " + bundle_dir, versions, {}, j.value("method", std::string())};
      ctx.origin = j.value("origin", "");
      out.reduced_dir = write_bundle_at((dir / "reduced").string(), f, ctx);
      json causes = json::array();
      for (const auto& c : out.fix.causes)
        causes.push_back({{"attribute", c.attribute}, {"value", c.value}, {"fixed_by", c.fixed_by}});
      json red = {{"nodes_before", out.nodes_before},
                  {"nodes_after", out.nodes_after},
                  {"input_elements_before", out.reduction.elements_before},
                  {"input_elements_after", out.reduction.elements},
                  {"input_nonzero_after", out.reduction.nonzero},
                  {"one_node", out.reduction.one_node},
                  {"intermittent", out.reduction.intermittent},
                  {"predicate_runs",
                   out.culprit.runs + out.reduction.runs + out.fix.runs + out.inputs.tried + out.inputs.searched},
                  {"steps", out.reduction.steps},
                  {"causes", causes},
                  {"localize_fix_tried", out.fix.tried},
                  {"random_inputs",
                   {{"tried", out.inputs.tried},
                    {"shown", out.inputs.shown},
                    {"genetic_search", {{"evaluations", out.inputs.searched}, {"found", out.inputs.search_shown}}},
                    {"verdict", out.inputs.verdict()}}}};
      if (!out.culprit.node.empty())
        red["culprit"] = {{"node", out.culprit.node},
                          {"op", out.culprit.op},
                          {"alone", out.culprit.evidence},
                          {"runs", out.culprit.runs}};
      core::write_file_atomic((fs::path(out.reduced_dir) / "reduction.json").string(), red.dump(1) + "\n");
      break;
    }
  }
  return params;
}

}  // namespace

BundleReduction reduce_bundle(const std::string& bundle_dir, int max_runs, std::ostream* log, WorkerSet* shared,
                              double hang_timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(bundle_dir);
  // What the reduced case must still show: the finding, or for the optimized stage the same kind cut to the
  // node where the optimized run first departs (below).
  json j = read_finding(bundle_dir);
  BundleReduction out;
  out.bundle = bundle_dir;
  out.signature = j.at("signature").get<std::string>();
  localize::Case original;
  original.graph = ir::load_graph((dir / "model.json").string());
  for (const auto& in : original.graph.inputs)
    original.inputs.emplace(
        in.name, core::read_npy((dir / "inputs" / (bundle_file_name(in.name) + ".npy")).string()).to(core::DType::F64));
  original.target = core::read_npy((dir / "target.npy").string());
  out.nodes_before = static_cast<int>(original.graph.nodes.size());
  Setup setup = bundle_setup(bundle_dir);
  const std::string blamed = j.at("backend").get<std::string>();
  const core::Stage stage = core::stage_from_string(j.at("stage").get<std::string>());
  // The optimized run and the batch relation's are inference runs: their reduction trains nothing (a cut
  // model's output need not fit the campaign's loss). A BR bundle's setup fixes the relation's batch.
  if (core::second_run_stage(stage)) setup.mode = Mode::Infer;
  const bool backward = stage == core::Stage::Backward;
  // What the blamed backend computed (in the pass the finding was judged on); a backend that
  // crashed before computing anything is fed the float64 reference's values (rounded to the
  // run's dtype when fed) instead.
  backends::ValueMap values = read_recorded_values(bundle_dir, blamed, original.graph, backward);
  if (values.empty()) values = read_recorded((dir / "outputs" / "ref").string(), original.graph);
  const backends::ValueMap grads = read_recorded((dir / "grads" / bundle_file_name(blamed)).string(), original.graph);
  std::unique_ptr<WorkerSet> own;
  if (!shared) own = std::make_unique<WorkerSet>(setup.backends, setup.limits);
  WorkerSet& workers = shared ? *shared : *own;
  // A hang reduces with each run's limit at `hang_timeout_s`; the workers get their own back after.
  const bool hang = core::finding_kind_from_string(j.at("kind").get<std::string>()) == core::FindingKind::Crash &&
                    j.at("message").get<std::string>().rfind(worker::to_string(worker::Status::Timeout), 0) == 0;
  struct Limit {
    WorkerSet& ws;
    std::vector<double> before;
    ~Limit() {
      for (size_t i = 0; i < before.size(); ++i) ws.at(i).set_timeout(before[i]);
    }
  } limit{workers, {}};
  if (hang && hang_timeout_s > 0)
    for (size_t i = 0; i < workers.size(); ++i) {
      limit.before.push_back(workers.at(i).timeout());
      workers.at(i).set_timeout(std::min(hang_timeout_s, workers.at(i).timeout()));
    }
  if (hang && hang_timeout_s > 0 && log) *log << "  a hang: each run's time limit " << hang_timeout_s << " s\n";
  // A case cut below the loss trains with its own loss (mse_loss, whose target gives it the
  // recorded incoming gradient), whatever loss the campaign used.
  // A case whose output the campaign's loss cannot take (a rank-3 pool cut from a model trained on [N, C]
  // predictions: the ancestors of a crash, a node alone) trains with mse_loss, which takes any shape; the
  // campaign's loss would make the reference's training refuse the case, and a forward finding look gone.
  auto setup_for = [&](const localize::Case& c) {
    Setup s = setup;
    if (!c.loss.empty()) s.loss = c.loss;
    else if (setup.mode != Mode::Infer && !loss_takes(s.loss, c.graph)) s.loss = "mse_loss";
    return s;
  };
  auto run = [&](const localize::Case& c) {
    const Setup s = setup_for(c);
    ModelCase m{c.graph, c.inputs, c.target};
    core::Rng rng(1);
    complete_case(m, s.loss, rng);
    return evaluate(m, s, workers);
  };
  const localize::Predicate holds = [&](const localize::Case& c) {
    for (const auto& f : run(c).findings)
      if (same_finding(f, j)) return true;
    return false;
  };
  // Whether the blamed backend ran the case normally (not refused, no crash).
  const localize::RanCheck ran = [&](const localize::Case& c) {
    for (const auto& r : run(c).runs)
      if (r.backend == blamed) return r.outcome.ok() && !r.unsupported && !r.values.empty();
    return false;
  };
  if (log) *log << "reduce " << bundle_dir << " (" << out.signature << ", " << out.nodes_before << " nodes)\n";
  const core::FindingKind kind = core::finding_kind_from_string(j.at("kind").get<std::string>());
  // The optimized run returns only the graph's outputs, so its finding names the output's node, wherever the
  // optimizer went wrong: the model cut at each node in turn (that node's output its only output, what it
  // does not need removed) shows where the optimized run first departs; the reduction starts from there.
  if (stage == core::Stage::Optimized && kind != core::FindingKind::Crash)
    for (size_t k = 0; k < original.graph.nodes.size(); ++k) {
      const std::string name = original.graph.nodes[k].name, op = original.graph.nodes[k].op;
      const std::string out = original.graph.nodes[k].outputs[0];
      if (name == j.at("node").get<std::string>()) break;
      localize::Case cut = original;
      cut.graph.outputs = {out};
      try {
        cut.graph = ir::remove_unused(cut.graph);
      } catch (const core::UserError&) {
        continue;
      }
      bool shows = false;
      for (const auto& f : run(cut).findings)
        shows |= f.kind == kind && f.stage == stage && f.backend == blamed;
      if (log) *log << "  optimized run cut at '" << name << "': " << (shows ? "departs here" : "agrees") << "\n";
      if (!shows) continue;
      original = std::move(cut);  // the node's own fields are gone with the old graph: copied above
      j["node"] = name;
      j["op"] = op;
      break;
    }
  const std::string named = j.at("node").get<std::string>();
  const bool crash = kind == core::FindingKind::Crash;
  // A crash keeps a third of the budget for its culprit (below).
  out.reduction = localize::reduce(original, named, backward, values, grads, holds,
                                   localize::ReduceOptions{crash ? max_runs - max_runs / 3 : max_runs, log});
  // A crash whose message names no node: the nodes of its reduced case (where it still shows, without
  // the nodes it does not need) alone, in order, each fed the reference's values of its inputs; the
  // first the blamed backend fails on or computes wrong (any finding against it) is the culprit. A
  // crash that names a node (the value an engine returned with a wrong shape) whose node runs right
  // alone began upstream: the same search over what that node depends on.
  if (crash && out.reduction.reproduced) {
    backends::ValueMap reference = read_recorded((dir / "outputs" / "ref").string(), original.graph);
    // A value whose shape the reduction changed (an attribute set to its default: a pool's strides) is
    // the float64 reference's on the reduced case itself: a recorded one no longer fits its consumer.
    try {
      const localize::Case& rc = out.reduction.reduced;
      for (auto& [name, v] : ref::forward(rc.graph, rc.inputs)) {
        const auto it = reference.find(name);
        if (it == reference.end() || it->second.shape() != v.shape()) reference.insert_or_assign(name, std::move(v));
      }
    } catch (const core::UserError&) {
    }
    const localize::NodeVerdict wrong = [&](const localize::Case& c) -> std::string {
      for (const auto& f : run(c).findings) {
        if (f.backend != blamed) continue;
        // A crash of a second run (OC, BR) has its culprit where that run fails: a finding of another stage
        // (the batch-N run's own NaN) is another cause.
        if (core::second_run_stage(stage) && f.stage != stage) continue;
        if (core::info(f.kind).signature == core::SignatureBy::Message) return f.message;
        return std::string(core::to_string(f.kind)) + " [" + core::to_string(f.stage) + "]";
      }
      return "";
    };
    localize::Case base = out.reduction.reduced;
    base.inputs = original.inputs;  // the model's own inputs; every other value the reference's
    const int budget = max_runs - out.reduction.runs;
    if (named.empty()) {
      out.culprit = localize::find_culprit(base, reference, wrong, budget, log);
    } else {
      // A named node that runs right alone began upstream. The part above it, run whole, fails where the
      // engine first returns a wrong value (an engine that returns every value names the first in the
      // graph's order: ONNX Runtime's dilated SAME MaxPool ten nodes above the Concat it made fail, seed
      // 10337), so that node is tried alone next: a few runs, not one per upstream node. Where that run
      // names nothing, or a node that runs right alone too, the upstream nodes alone in order, as for an
      // unnamed crash.
      int spent = 0;
      std::string at = named;
      try {
        // Two steps at most: the named node, then the node the run of the part above it names.
        for (int step = 0; step < 2 && budget - spent > 0; ++step) {
          const ir::Node* n = base.graph.find_node(at);
          if (!n) break;
          localize::Case alone = base, up = base;
          alone.graph = ir::one_node(base.graph, at);
          const localize::Culprit self = localize::find_culprit(alone, reference, wrong, 1, log);
          spent += self.runs;
          if (!self.node.empty()) {
            out.culprit = self;
            break;
          }
          up.graph.outputs.clear();
          for (size_t i = 0; i < ir::data_input_count(*n); ++i)
            if (base.graph.producer(n->inputs[i])) up.graph.outputs.push_back(n->inputs[i]);
          if (self.runs != 1 || up.graph.outputs.empty() || budget - spent <= 0) break;
          up.graph = ir::remove_unused(up.graph);
          std::string next;
          if (step == 0) {
            ++spent;
            for (const auto& f : run(up).findings)
              if (f.backend == blamed && f.kind == core::FindingKind::Crash &&
                  (!core::second_run_stage(stage) || f.stage == stage)) {
                next = f.node;
                break;
              }
            if (log)
              *log << "  culprit [" << spent << "] above '" << at << "' run whole: "
                   << (next.empty() ? "names no node" : "fails at '" + next + "'") << "\n";
          }
          if (next.empty() || next == at || !base.graph.find_node(next)) {
            out.culprit = localize::find_culprit(up, reference, wrong, budget - spent, log);
            spent += out.culprit.runs;
            break;
          }
          at = next;
        }
      } catch (const core::UserError&) {
      }
      out.culprit.runs = spent;
    }
  }
  out.nodes_after = static_cast<int>(out.reduction.reduced.graph.nodes.size());
  std::string reduced_params;  // the reduced case's finding's: for the optimized stage, what the optimizer did
  if (out.reduction.reproduced) {
    // Localize-fix on one node, and on the few nodes an optimizer fused (the optimized stage's reduced pattern).
    if (out.reduction.one_node || stage == core::Stage::Optimized)
      out.fix =
          localize::localize_fix(out.reduction.reduced, holds,
                                 std::max(0, max_runs - out.culprit.runs - out.reduction.runs), log, ran);
    // No parameter removes it: on fresh random inputs too (a bug for every input, or some)?
    const int left = max_runs - out.culprit.runs - out.reduction.runs - out.fix.runs;
    if (out.reduction.one_node && out.fix.causes.empty() && left > 0)
      out.inputs = localize::search_inputs(out.reduction.reduced, holds, std::min(left, kInputSearchTries), log);
    // Shown on none of the random draws: Audee's genetic search on the one-node model, from fresh
    // random inputs, tells a bug for some inputs (it finds others that show it) from one of the
    // recorded inputs only.
    const int ga_left = left - out.inputs.tried;
    if (out.inputs.tried > 0 && out.inputs.shown == 0 && ga_left > 0)
      genetic_input_search(out, setup_for(out.reduction.reduced), workers, kind, j, std::min(ga_left, kGeneticBudget),
                           log);
    // Then the smallest shapes, with what budget is left (the parameter evidence comes first); a
    // backward case keeps the matching part of its incoming gradient (localize::shrink_inputs).
    localize::shrink_inputs(
        out.reduction, holds,
        localize::ReduceOptions{max_runs - out.culprit.runs - out.fix.runs - out.inputs.tried - out.inputs.searched,
                                log});
    // The reduced case as a bundle of its own, beside the original.
    reduced_params = write_reduced_bundle(out, setup_for(out.reduction.reduced), workers, j, bundle_dir);
  }
  // The root cause's key.
  std::string op = j.at("op").get<std::string>();
  if (out.reduction.reproduced && op.empty() && out.reduction.reduced.graph.nodes.size() == 1)
    op = out.reduction.reduced.graph.nodes[0].op;
  if (!out.culprit.node.empty()) op = out.culprit.op;
  out.root_cause = std::string(core::to_string(kind)) + "|" + core::to_string(stage) + "|" +
                   j.at("backend").get<std::string>() + "|" + op + "|";
  if (!out.culprit.node.empty()) {
    // Keyed by its culprit and what it shows alone: whatever later node each model failed in, one
    // cause (and the same as a crash that names the culprit itself with that message).
    out.root_cause += out.culprit.evidence;
  } else if (core::info(kind).signature == core::SignatureBy::Message) {
    out.root_cause += j.at("message").get<std::string>();
  } else if (!out.reduction.reproduced) {
    out.root_cause = out.signature;  // not reproduced: its own root cause
  } else {
    // The optimized stage: keyed by what the optimizer did in the reduced case (the parameters localize-fix
    // names there are shown, not keyed: which of a pattern's several it reaches within the budget varies).
    if (stage == core::Stage::Optimized) {
      out.root_cause += reduced_params;
    } else {
      std::vector<std::string> named;
      for (const auto& c : out.fix.causes) named.push_back(c.attribute);
      std::sort(named.begin(), named.end());
      for (size_t i = 0; i < named.size(); ++i) out.root_cause += (i ? "," : "") + named[i];
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace quorum::campaign
