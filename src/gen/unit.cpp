// Unit mode (Muffin-UT): one operator per model, cycling the catalogue; successive rounds cycle
// each attribute through its domain (every choice of an enumeration, the bounds of a range), so
// that parameter values a random draw rarely hits are still exercised. With the random data set the
// operator's own sampled inputs are the graph inputs; with a real data set the data's input is
// reshaped to them, and an output layer for the task follows.
#include <algorithm>
#include <cmath>
#include <optional>

#include "gen/factories.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

// The value attribute `a` (position j) takes in round `round`, or nullopt to keep the sampled one.
std::optional<core::AttrValue> cycled(const ops::AttrSpec& a, uint64_t round, size_t j) {
  if (!a.choices.empty()) return a.choices[(round + j) % a.choices.size()];
  const uint64_t phase = (round + j) % 3;
  if (phase == 0) return std::nullopt;
  const double bound = phase == 1 ? a.lo : a.hi;
  if (!std::isfinite(bound)) return std::nullopt;
  switch (a.kind) {
    case core::AttrKind::Int: return core::AttrValue(static_cast<int64_t>(bound));
    case core::AttrKind::Float: return core::AttrValue(bound);
    default: return std::nullopt;  // list lengths depend on the input: keep the sampled lists
  }
}

bool fits(const ops::OpSpec& spec, const std::vector<TensorType>& in, Attrs& a) {
  try {
    a = ops::canonical_attrs(spec, a);
    spec.infer(in, a);
    return true;
  } catch (const core::OpError&) {
    return false;
  }
}

// A quantized operand of a unit model: the float input quantized to `type` by a quantize_linear whose scale
// and zero point are drawn; `gen` (the input's value range, when it has one) then spans the type's range
// and a little more, so both ends saturate now and then.
Vid quantize_input(Builder& b, Vid x, core::DType type, ops::InputGen* gen, core::Rng& rng) {
  const std::string t = type == core::DType::U8 ? "uint8" : "int8";
  const double scale = ops::draw_scale(rng);
  const int64_t zp = ops::draw_zero_point(rng, t);
  const auto [lo, hi] = core::dtype_range(type);
  if (gen) {
    *gen = ops::InputGen{(lo - 8 - static_cast<double>(zp)) * scale, (hi + 8 - static_cast<double>(zp)) * scale};
    gen->tie_grid = scale;  // rounding ties, judged where the scale is a power of two
  }
  return b.add("quantize_linear", {x}, {{"scale", scale}, {"zero_point", zp}, {"to", t}});
}

class Unit : public Generator {
 public:
  Unit(const GenOptions& opt, const data::Source& source) : opt_(opt), source_(source) {
    for (const ops::OpSpec* s : ops::catalogue().all())
      if (op_allowed(opt, s->name) && s->is_quantized == opt.quantized) ops_.push_back(s);  // --ops / --skip_ops
    if (ops_.empty()) throw core::UserError("unit: --ops/--skip_ops leave no operator");
  }

  std::string name() const override { return "unit"; }

  std::vector<std::string> operators() const override {
    std::vector<std::string> v;
    for (const ops::OpSpec* s : ops_) v.push_back(s->name);
    std::sort(v.begin(), v.end());
    return v;
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    const ops::OpSpec& spec = *ops_[index % ops_.size()];
    const uint64_t round = index / ops_.size();
    ops::Case c = spec.sample(rng);
    Attrs base = ops::canonical_attrs(spec, c.attrs);
    // Cycle every attribute; where the shape rule refuses the combination, give cycled values back
    // one at a time (last first) until it accepts.
    Attrs attrs = base;
    std::vector<std::string> changed;
    for (size_t j = 0; j < spec.attrs.size(); ++j)
      if (auto v = cycled(spec.attrs[j], round, j); v && !(*v == base.at(spec.attrs[j].name))) {
        attrs[spec.attrs[j].name] = *v;
        changed.push_back(spec.attrs[j].name);
      }
    while (!fits(spec, c.inputs, attrs) && !changed.empty()) {
      attrs[changed.back()] = base.at(changed.back());
      changed.pop_back();
    }
    std::vector<core::DType> quantized;  // per data input: its int8/uint8 type, made by a quantize_linear
    for (auto& t : c.inputs) {
      quantized.push_back(t.dtype);
      t.dtype = core::DType::F32;
    }

    Builder b(rng, opt_.limits);
    b.set_guard_probability(0);  // the operator alone, as its sampler meant its inputs
    std::vector<Vid> in;
    data::DataSpec d;  // with the random data set: no source batch, no task
    std::vector<ops::InputGen> gens;
    if (source_.name() == "random") {
      for (size_t i = 0; i < c.inputs.size(); ++i) in.push_back(b.input(c.inputs[i].shape, "in" + std::to_string(i)));
      d.input = c.inputs[0].shape;
      gens = c.gen;  // the operator's own value ranges (positive operands for log, probabilities for losses)
    } else {
      d = source_.spec(rng, data::Want::Any);
      const Vid x = b.input(d.input);
      for (const auto& t : c.inputs) in.push_back(b.to_shape(x, t.shape));
    }
    for (size_t i = 0; i < in.size(); ++i) {
      if (!core::is_quantized(quantized[i])) continue;
      if (source_.name() == "random" && gens.size() <= i) gens.resize(i + 1);  // InputGen{} for the others
      in[i] = quantize_input(b, in[i], quantized[i], i < gens.size() ? &gens[i] : nullptr, rng);
    }
    Vid y = b.add(spec.name, in, attrs);
    if (!spec.is_loss && d.task != data::Task::None) y = b.head(y, d);
    b.output(y);
    Model m = b.finish("unit_" + std::to_string(index) + "_" + spec.name, d);
    m.input_gen = std::move(gens);
    return m;
  }

 private:
  GenOptions opt_;
  const data::Source& source_;
  std::vector<const ops::OpSpec*> ops_;
};

}  // namespace

std::unique_ptr<Generator> make_unit(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<Unit>(opt, source);
}

}  // namespace quorum::gen
