// Generators by name, the model stream, validity checks and run summaries.
#include "gen/generator.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

#include "data/values.h"
#include "gen/factories.h"
#include "gen/quantize.h"
#include "ops/materialize.h"
#include "ops/registry.h"

namespace quorum::gen {

const std::vector<std::string>& generator_names() {
  static const std::vector<std::string> names = {"muffin", "unit", "ws", "rn", "mutate", "mcts", "zoo"};
  return names;
}

bool op_allowed(const GenOptions& opt, const std::string& op) {
  if (!opt.only_ops.empty() && std::find(opt.only_ops.begin(), opt.only_ops.end(), op) == opt.only_ops.end())
    return false;
  return std::find(opt.skip_ops.begin(), opt.skip_ops.end(), op) == opt.skip_ops.end();
}

namespace {

// A generator whose models hold only the operators --ops / --skip_ops allow: the inner generator
// draws its layers from them already; a model that still holds another is drawn again from the
// same stream (so model i stays a function of the seed and i), and after kTries it is invalid.
class Restricted : public Generator {
 public:
  Restricted(std::unique_ptr<Generator> inner, GenOptions opt) : inner_(std::move(inner)), opt_(std::move(opt)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<std::string> operators() const override {
    std::vector<std::string> v;
    for (const auto& op : inner_->operators())
      if (op_allowed(opt_, op)) v.push_back(op);
    return v;
  }
  Model generate(uint64_t index, core::Rng& rng) override {
    constexpr int kTries = 20;
    std::string held;
    for (int t = 0; t < kTries; ++t) {
      Model m = inner_->generate(index, rng);
      held.clear();
      for (const auto& n : m.graph.nodes)
        if (!op_allowed(opt_, n.op)) {
          held = n.op;
          break;
        }
      if (held.empty()) return m;
    }
    throw core::UserError("model " + std::to_string(index) + ": holds operator '" + held +
                          "', which --ops/--skip_ops leave out, in " + std::to_string(kTries) + " draws");
  }
  void outcome(uint64_t index, bool success) override { inner_->outcome(index, success); }

 private:
  std::unique_ptr<Generator> inner_;
  GenOptions opt_;
};

// --dtype int8: the inner generator's models, marked to be quantized once drawn (finish_model). Their
// operators are the inner generator's and the quantized ones that replace them.
class Quantizing : public Generator {
 public:
  explicit Quantizing(std::unique_ptr<Generator> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<std::string> operators() const override {
    std::vector<std::string> v = inner_->operators();
    for (const ops::OpSpec* s : ops::catalogue().all())
      if (s->is_quantized && std::find(v.begin(), v.end(), s->name) == v.end()) v.push_back(s->name);
    std::sort(v.begin(), v.end());
    return v;
  }
  Model generate(uint64_t index, core::Rng& rng) override {
    Model m = inner_->generate(index, rng);
    m.quantize = true;
    return m;
  }
  void outcome(uint64_t index, bool success) override { inner_->outcome(index, success); }

 private:
  std::unique_ptr<Generator> inner_;
};

}  // namespace

std::unique_ptr<Generator> make_unrestricted(const GenOptions& opt, const data::Source& source) {
  const std::string& g = opt.generator;
  if (g == "muffin") return make_muffin(opt, source);
  if (g == "unit") return make_unit(opt, source);
  if (g == "ws") return make_ws(opt, source);
  if (g == "rn") return make_rn(opt, source);
  if (g == "mutate") return make_mutate(opt, source);
  if (g == "mcts") return make_mcts(opt, source);
  if (g == "zoo") return make_zoo(opt, source);
  return nullptr;
}


std::unique_ptr<Generator> make_generator(const GenOptions& opt, const data::Source& source) {
  for (const auto* list : {&opt.only_ops, &opt.skip_ops})
    for (const auto& op : *list)
      if (!ops::catalogue().find(op))
        throw core::UserError(std::string(list == &opt.only_ops ? "--ops" : "--skip_ops") + ": '" + op +
                              "' is not a catalogue operator (quorum ops lists them)");
  // --dtype int8: quantize_linear and dequantize_linear are every quantized model's boundaries (the unit
  // generator's quantized operands, the quantized graphs' edges): --ops need not name them (a model holding
  // them was drawn again until the budget ran out), and --skip_ops cannot leave them out.
  GenOptions restrict = opt;
  if (opt.quantized)
    for (const char* op : {"quantize_linear", "dequantize_linear"}) {
      if (std::find(opt.skip_ops.begin(), opt.skip_ops.end(), op) != opt.skip_ops.end())
        throw core::UserError(std::string("--skip_ops: '") + op +
                              "' makes every --dtype int8 model; it cannot be left out");
      if (!opt.only_ops.empty() && !op_allowed(opt, op)) restrict.only_ops.push_back(op);
    }
  if (auto g = make_unrestricted(opt, source)) {
    if (opt.quantized) g = std::make_unique<Quantizing>(std::move(g));
    if (opt.only_ops.empty() && opt.skip_ops.empty()) return g;
    return std::make_unique<Restricted>(std::move(g), restrict);
  }
  std::string all;
  for (const auto& n : generator_names()) all += (all.empty() ? "" : ", ") + n;
  throw core::UserError("unknown generator '" + opt.generator + "' (choose " + all + ")");
}

// ---- the stream -----------------------------------------------------------------------------

core::Rng model_rng(uint64_t seed, uint64_t index) { return core::Rng(seed).derive("model:" + std::to_string(index)); }
core::Rng case_rng(uint64_t seed, uint64_t index) { return core::Rng(seed).derive("data:" + std::to_string(index)); }

Stream::Stream(const GenOptions& opt, const data::Source& source)
    : source_(source), gen_(make_generator(opt, source)), seed_(opt.seed) {}

Model Stream::next_architecture() {
  core::Rng r = model_rng(seed_, index_);
  Model m = gen_->generate(index_, r);
  ++index_;
  return m;
}

Generated Stream::next() {
  core::Rng r = model_rng(seed_, index_);
  Model m = gen_->generate(index_, r);
  ++index_;
  return finish_model(std::move(m), r, source_);
}

Generated finish_model(Model m, core::Rng& model_rng, const data::Source& source) {
  // derive() depends on the stream's seed only, not on how much of it generation consumed.
  core::Rng wr = model_rng.derive("weights"), dr = model_rng.derive("data");
  Generated out;
  out.data = m.data;
  out.invalid_by_design = m.invalid_by_design;
  out.note = m.note;
  const std::vector<ops::InputGen> gens = m.input_gen;
  const bool quantize = m.quantize;
  out.graph = materialize(std::move(m), wr);
  ir::Graph& g = out.graph;
  if (g.inputs.size() == 1 && out.data.source == source.name() && g.inputs[0].type.shape == out.data.input) {
    data::Batch b = source.batch(out.data, dr);
    out.inputs.emplace(g.inputs[0].name, std::move(b.input));
    const auto t = g.types.find(g.outputs.empty() ? std::string() : g.outputs[0]);
    if (out.data.task != data::Task::None && b.target.defined() && t != g.types.end() &&
        t->second.shape == b.target.shape())
      out.target = std::move(b.target);
  } else {
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const auto& in = g.inputs[i];
      out.inputs.emplace(in.name, data::input_value(in.type, i < gens.size() ? &gens[i] : nullptr, dr));
    }
  }
  if (quantize) {
    core::Rng qr = model_rng.derive("quantize");
    try {
      quantize_model(g, out.inputs, qr);
    } catch (const std::exception& e) {  // a model the reference cannot run stays float; check_model says why
      out.note += (out.note.empty() ? "" : "; ") + std::string("not quantized: ") + e.what();
    }
  }
  return out;
}

// ---- validity -------------------------------------------------------------------------------

Verdict check_model(const ir::Graph& g, const ref::ValueMap& inputs, bool allow_invalid_attrs) {
  ir::Graph v = g;
  try {
    ir::validate(v, g.name, {allow_invalid_attrs});
  } catch (const core::UserError& e) {
    return {false, std::string("validate: ") + e.what()};
  }
  try {
    ref::forward(v, inputs);
  } catch (const std::exception& e) {
    return {false, std::string("reference: ") + e.what()};
  }
  return {};
}

std::string reason_key(const std::string& reason) {
  std::string s = reason;
  // "(inputs f32[1,2], ...)" repeats the shapes: the rule's own words are the reason.
  if (auto p = s.find(" (inputs "); p != std::string::npos) s.erase(p);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 6, "node '") == 0) {
      const size_t end = s.find('\'', i + 6);
      if (end != std::string::npos) {
        out += "node";
        i = end;
        continue;
      }
    }
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      while (i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
      out += '#';
      continue;
    }
    out += s[i];
  }
  return out;
}

// ---- summary --------------------------------------------------------------------------------

void Summary::add(const Generated& g, const Verdict& v) {
  const size_t n = g.graph.nodes.size();
  min_nodes = models == 0 ? n : std::min(min_nodes, n);
  max_nodes = std::max(max_nodes, n);
  total_nodes += n;
  ++models;
  std::set<std::string> used;
  for (const auto& node : g.graph.nodes) {
    ++op_nodes[node.op];
    used.insert(node.op);
  }
  for (const auto& op : used) ++op_models[op];
  if (g.invalid_by_design) {
    ++by_design;
    if (!v.valid) ++by_design_rejected;
    else ++accepted_invalid[reason_key(g.note)];
  } else if (v.valid) {
    ++valid;
  } else {
    ++invalid[reason_key(v.reason)];
  }
}

std::vector<std::string> Summary::missing(const std::vector<std::string>& universe) const {
  std::vector<std::string> m;
  for (const auto& op : universe)
    if (!op_nodes.count(op)) m.push_back(op);
  return m;
}

std::string Summary::text(const std::vector<std::string>& universe) const {
  std::ostringstream os;
  os << "models: " << models << "\n";
  if (models == 0) return os.str();
  os << "nodes per model: min " << min_nodes << ", mean " << std::fixed << std::setprecision(1)
     << static_cast<double>(total_nodes) / static_cast<double>(models) << ", max " << max_nodes << "\n";
  const auto miss = missing(universe);
  os << "operators used: " << op_nodes.size() << " (" << universe.size() - miss.size() << " of the "
     << universe.size() << " this generator may use)\n";
  size_t col = 0;
  for (const auto& [op, count] : op_nodes) {
    std::ostringstream cell;
    cell << op << " " << count << "/" << op_models.at(op);
    os << (col == 0 ? "  " : "") << std::left << std::setw(30) << cell.str();
    if (++col == 4) {
      os << "\n";
      col = 0;
    }
  }
  if (col) os << "\n";
  os << "  (nodes/models using the operator)\n";
  if (!miss.empty()) {
    os << "never used:";
    for (const auto& op : miss) os << " " << op;
    os << "\n";
  }
  const uint64_t checked = models - by_design;
  os << "validity: " << valid << " of " << checked << " valid";
  if (checked)
    os << " (" << std::setprecision(2) << 100.0 * static_cast<double>(valid) / static_cast<double>(checked) << "%)";
  os << "\n";
  for (const auto& [reason, count] : invalid) os << "  invalid " << count << "x: " << reason << "\n";
  if (by_design) {
    os << "deliberately invalid: " << by_design << ", rejected by Quorum's own validation: " << by_design_rejected
       << "\n";
    for (const auto& [what, count] : accepted_invalid) os << "  accepted " << count << "x: " << what << "\n";
  }
  return os.str();
}

}  // namespace quorum::gen
