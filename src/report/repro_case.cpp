// A bundle read as the case its reproducer shows (report/repro.h).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "campaign/evaluate.h"
#include "core/error.h"
#include "core/npy.h"
#include "ir/edit.h"
#include "ir/json_io.h"
#include "oracle/judge_util.h"
#include "ops/registry.h"
#include "oracle/node_kernel.h"
#include "ref/interpreter.h"
#include "report/repro.h"

namespace quorum::report {

namespace {

namespace fs = std::filesystem;
using backends::ReproCase;

// Unreduced models up to this many nodes are reproduced whole.
constexpr size_t kWholeModelNodes = 8;
using backends::ValueMap;

std::string library_version(const nlohmann::ordered_json& j, const std::string& backend) {
  for (const auto& b : j.value("backends", nlohmann::ordered_json::array()))
    if (b.value("backend", "") == backend) return b.value("version", "");
  return "";
}

ValueMap read_inputs(const fs::path& dir, const ir::Graph& g) {
  ValueMap m;
  for (const auto& in : g.inputs)
    m.emplace(in.name, core::read_npy((dir / "inputs" / (campaign::bundle_file_name(in.name) + ".npy")).string())
                           .to(core::DType::F64));
  return m;
}

// The float64 vector-Jacobian product of `n` on the operands in `values` and the incoming
// gradients `incoming` (keyed by output name), keyed by input name.
ValueMap node_vjp(const ir::Node& n, const ValueMap& values, const ValueMap& incoming) {
  std::vector<core::Tensor> operands, out, gout;
  for (const auto& v : n.inputs) {
    const auto it = values.find(v);
    if (it == values.end()) return {};
    operands.push_back(it->second);
  }
  for (const auto& o : n.outputs) {
    const auto v = values.find(o);
    const auto gi = incoming.find(o);
    if (v == values.end()) return {};
    out.push_back(v->second);
    gout.push_back(gi != incoming.end() ? gi->second : core::Tensor(core::DType::F64, v->second.shape()));
  }
  const std::vector<core::Tensor> grads = oracle::node_vjp(n, operands, out, gout);
  ValueMap m;
  for (size_t i = 0; i < n.inputs.size() && i < grads.size(); ++i)
    if (grads[i].defined()) m[n.inputs[i]] = grads[i];
  return m;
}

}  // namespace

void read_finding_fields(const nlohmann::ordered_json& top_j, const nlohmann::ordered_json& j, const std::string& where,
                         ReproCase& c) {
  try {
    c.backend = j.at("backend").get<std::string>();
    c.library_version = library_version(j, c.backend);
    if (c.library_version.empty()) c.library_version = library_version(top_j, c.backend);
    c.signature = top_j.at("signature").get<std::string>();
    c.kind = core::finding_kind_from_string(j.at("kind").get<std::string>());
    c.stage = core::stage_from_string(j.at("stage").get<std::string>());
    c.op = j.value("op", "");
    c.node = j.value("node", "");
    c.detail = j.value("detail", "");
    if (c.detail.empty()) c.detail = j.value("message", "");
    c.known = top_j.value("known", "");
    c.lowering = j.value("lowering", std::vector<std::string>{});
    c.quorum_version = top_j.value("quorum_version", "");
    for (const char* key : {"seed", "model_index"})  // a number beyond an integer is no index (converting it: UB)
      if (top_j.contains(key) && !top_j.at(key).is_number_integer())
        throw core::UserError(std::string(key) + " is not an integer");
    c.seed = top_j.value("seed", uint64_t{0});
    c.model_index = top_j.value("model_index", int64_t{0});
    c.method = top_j.value("method", "random");
    c.origin = top_j.value("origin", "");
  } catch (const nlohmann::ordered_json::exception& e) {
    throw core::UserError(where + ": malformed finding: " + e.what());
  } catch (const core::UserError& e) {  // a kind or stage no build knows
    throw core::UserError(where + ": malformed finding: " + e.what());
  }
}

backends::ReproCase load_repro_case(const std::string& bundle_dir) {
  const fs::path top(bundle_dir);
  const auto top_j = campaign::read_finding(bundle_dir);
  const campaign::Setup setup = campaign::bundle_setup(bundle_dir);
  const bool reduced = fs::exists(top / "reduced" / "finding.json");
  const fs::path dir = reduced ? top / "reduced" : top;
  const auto j = reduced ? campaign::read_finding(dir.string()) : top_j;

  ReproCase c;
  read_finding_fields(top_j, j, (dir / "finding.json").string(), c);
  c.bundle = bundle_dir;
  c.replay = campaign::replay_command(dir.string());
  c.dtype = setup.dtype;
  c.train = core::training_stage(c.stage);
  c.loss = setup.loss;

  ir::Graph g = ir::load_graph((dir / "model.json").string());
  ValueMap inputs = read_inputs(dir, g);
  const std::string lib = campaign::bundle_file_name(c.backend);
  ValueMap recorded = campaign::read_recorded_values(dir.string(), c.backend, g, c.train);
  ValueMap recorded_grads = campaign::read_recorded((dir / "grads" / lib).string(), g);
  // The batch relation: the model at the wide batch its finding was judged in (the bundle's setup fixes it),
  // every value expected from the float64 reference there; the library's recorded values are its run of the
  // model's own batch, which is right.
  // The position relation likewise, at the wider axis.
  if (c.stage == core::Stage::Batch || c.stage == core::Stage::Position) {
    ValueMap fed;
    for (const auto& [name, t] : inputs) fed[name] = t.to(c.dtype);
    const campaign::Setup here = campaign::bundle_setup(dir.string());
    const bool batch = c.stage == core::Stage::Batch;
    if (const auto w = batch ? campaign::wide_case(g, fed, here) : campaign::positioned_case(g, fed, here)) {
      const std::string span = std::to_string(w->position) + ".." + std::to_string(w->position + w->samples - 1);
      c.detail += batch ? "; the program runs the batch of " + std::to_string(w->batch) +
                              ", the model's samples at rows " + span
                        : "; the program runs input axis " + std::to_string(w->axis) + " widened to " +
                              std::to_string(w->batch) + ", the model's values at positions " + span;
      g = w->graph;
      inputs = w->inputs;
      recorded.clear();
      recorded_grads.clear();
    }
  }
  // The form relation: the model read in the other exchange form its finding was judged in (the bundle's setup
  // names the draw); the library's recorded values are its run of the model's own form, which is right.
  if (c.stage == core::Stage::Form) {
    g.form_draw = campaign::bundle_setup(dir.string()).form_relation.draw;
    c.detail += "; the program reads the model in its other exchange form (form draw " +
                std::to_string(g.form_draw) + ")";
    recorded.clear();
    recorded_grads.clear();
  }
  c.model = g;
  c.inputs = inputs;
  bool cut = false;
  // An unreduced finding at one node of a large model: that node alone, fed what the library fed
  // it. A small model stays whole (a ledger case is minimal already, and graph rewrites such as
  // fusing a pad into a convolution need the neighbours). A detection finding (quorum detect) is a
  // difference of the whole model's prediction: its model stays whole.
  if (!reduced && g.nodes.size() > kWholeModelNodes && !c.node.empty() && c.kind != core::FindingKind::Detection &&
      c.stage != core::Stage::Batch && c.stage != core::Stage::Form && c.stage != core::Stage::Position) {
    bool have = true;
    ValueMap fed;
    for (const auto& n : g.nodes) {
      if (n.name != c.node) continue;
      for (size_t i = 0; i < ir::data_input_count(n); ++i) {
        const std::string& v = n.inputs[i];
        if (inputs.count(v)) fed[v] = inputs.at(v);
        else if (recorded.count(v)) fed[v] = recorded.at(v);
        else have = false;
      }
    }
    if (have && !fed.empty()) {
      c.whole_model = g;
      c.whole_inputs = inputs;
      for (auto& [name, t] : c.whole_inputs) t = t.to(c.dtype);
      c.model = ir::one_node(g, c.node);
      c.inputs = fed;
      cut = true;
    }
  }
  for (auto& [name, t] : c.inputs) t = t.to(c.dtype);
  // A node cut out of a training finding has no loss of its own (the target fits the whole model's
  // output): its backward is shown with the library's incoming gradient (`incoming`, `node_grads`).
  if (c.train) c.target = core::read_npy((dir / "target.npy").string());
  if (c.train && !cut) {
    const auto r = ref::train(c.model, c.inputs, c.target, ref::LossSpec{c.loss, {}});
    c.expected = r.values;
    c.expected_grads = r.grads;
  } else {
    c.expected = ref::forward(c.model, c.inputs);
  }
  for (const auto& [v, t] : recorded)
    if (c.model.types.count(v)) c.actual[v] = t;
  for (const auto& [v, t] : recorded_grads)
    if (c.model.types.count(v)) c.actual_grads[v] = t;
  if (const ir::Node* n = c.blamed()) {
    c.tol = oracle::detail::node_tolerance(c.model, *n, c.dtype, core::training_stage(c.stage));
    if (c.backward()) {
      for (const auto& o : n->outputs)
        if (recorded_grads.count(o)) c.incoming[o] = recorded_grads.at(o);
      if (!c.incoming.empty()) c.node_grads = node_vjp(*n, c.expected, c.incoming);
    }
  } else {
    c.tol = ops::Tolerance{1e-5, 1e-4};
  }
  return c;
}

}  // namespace quorum::report
