// The quantized twins of float operators in ONNX Runtime's operator form (its com.microsoft contrib
// operators, which OpenCV 4.6 reads too): QLinearAdd, QLinearMul, QLinearAveragePool,
// QLinearGlobalAveragePool, QLinearConcat, QLinearLeakyRelu and QLinearSigmoid; and max pooling, which has no
// quantized operator of its own: tools keep its input's and output's quantization equal and run ONNX MaxPool
// (int8/uint8 since opset 12) on the quantized tensor as it is. Each is its float
// operator on dequantized inputs, requantized:
//   y = saturate(round_half_even(f((x_0 - zp_0) * scale_0, ...) / y_scale) + y_zero_point)
// with f the float operator's own float64 kernel, shape rule, attributes and sampler (one definition,
// so the quantized pooling has the float pooling's geometry) and its own ONNX hooks for the node's
// attributes, read through a view that shows the float node. Inputs and output share one type (int8
// or uint8, the attribute `to`), as ONNX Runtime's kernels require; every input has its own scale and
// zero point (the lists x_scales and x_zero_points, one entry per data input). A float32
// implementation dequantizes, multiplies by scale ratios or reads a table computed in float32: its
// roundings are marked stored, so a result on the other side of a rounding tie from a float32
// evaluation is inside the spread. Exchange forms (`qlinear=operator|qdq`): the contrib operator, or the QDQ
// form quantization tools write (DequantizeLinear on each input, the float operator, QuantizeLinear), which
// an engine runs in float32 as written or fuses back to its quantized kernel when it optimizes.
#include <cfloat>
#include <cmath>
#include <cstdlib>

#include "ops/kernel_util.h"
#include "ops/onnx_map.h"
#include "ops/qdq_form.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::ops {
namespace {

const char* const kDomain = "com.microsoft";

struct QDef {
  std::string name;      // the catalogue's name
  std::string float_op;  // the float operator it quantizes
  // The com.microsoft operator type; empty: none, the float operator runs on the quantized tensor itself
  // (MaxPool), which is the node only where every input's scale and zero point are the output's (else only the
  // QDQ form writes it), and such an ONNX node of an int8/uint8 input imports as the twin with scale 1, zero
  // point 0 (registered as "quantized.<float ONNX type>", ir/onnx_io.cpp).
  std::string onnx;
  std::string float_onnx;  // the float operator's ONNX type (its import hook's view)
  bool y_first = false;    // QLinearConcat: y_scale, y_zero_point before the inputs' triples
  // A sum, product or selection of the dequantized inputs: with every scale a power of two, every float32
  // formulation (dequantize first, or scale ratios a_scale / y_scale) computes a float32-representable result
  // exactly, so its rounding ties are judged (ops::real_to_round's rule for these operators).
  bool linear = false;
  // The output scale drawn for a sampled case from the inputs' scales: the result's typical size, so a case
  // neither always saturates nor rounds to 0.
  std::function<double(core::Rng&, const std::vector<double>&)> y_scale;
  // The float operator's result is one of its inputs' values (a maximum): with every input quantized as the
  // output, the twin's result is that input integer, exact whatever the scale (no requantization); the sampler
  // then draws the output's quantization equal to the input's most of the time, as tools write it.
  bool selects = false;
};

const std::vector<double>& scales_of(const Attrs& a) { return core::attr_floats(a, "x_scales"); }
const std::vector<int64_t>& zero_points_of(const Attrs& a) { return core::attr_ints(a, "x_zero_points"); }
double f32(double v) { return static_cast<double>(static_cast<float>(v)); }
bool power_of_two(double v) {
  int e = 0;
  return v > 0 && std::isfinite(v) && std::frexp(v, &e) == 0.5;
}

// Every input's (float32) scale and zero point equal the output's: a selection is then the input integer.
bool same_quantization(const Attrs& a) {
  const double ys = quant_scale(a, "y_scale");
  const int64_t yzp = core::attr_i(a, "y_zero_point");
  const auto& scales = scales_of(a);
  const auto& zps = zero_points_of(a);
  for (size_t i = 0; i < scales.size(); ++i)
    if (f32(scales[i]) != ys || zps.at(i) != yzp) return false;
  return true;
}

// The float node as its export hook sees it: a float32 node whose final node becomes the contrib operator with
// each data input's scale and zero point beside it. A decomposition has no quantized form: refused.
class QuantizedExport final : public OnnxExport {
 public:
  QuantizedExport(OnnxExport& e, const QDef& d) : e_(e), d_(d) {}
  int opset() const override { return e_.opset(); }
  const std::string& op() const override { return d_.float_op; }
  const std::string& name() const override { return e_.name(); }
  const std::vector<std::string>& inputs() const override { return e_.inputs(); }
  const core::Attrs& attrs() const override { return e_.attrs(); }
  const std::string& out() const override { return e_.out(); }
  core::DType dtype() const override { return DType::F32; }
  const core::Shape& in_shape(size_t i) const override { return e_.in_shape(i); }
  OnnxNode& final_node(const std::string& type, const std::vector<std::string>& ins) override {
    const DType t = e_.dtype();
    // No quantized operator: the float one on the quantized tensor, where the quantization stays the input's
    // (ONNX MaxPool takes int8/uint8 since opset 12), or the QDQ form; otherwise only the QDQ form.
    const bool plain = d_.onnx.empty();
    const bool operator_form = !plain || (same_quantization(e_.attrs()) && opset() >= 12);
    const bool qdq = choose_qdq(e_, operator_form);
    if (!operator_form && !qdq)
      refuse(d_.float_onnx + " on int8/uint8 needs its output quantized as its input (opset 12 on); the QDQ form "
             "needs every scale in [2^-30, 2^30]");
    if (plain && !qdq) return e_.final_node(type, ins);
    const auto& scales = scales_of(e_.attrs());
    const auto& zps = zero_points_of(e_.attrs());
    std::vector<std::string> y = {scale_constant(e_, e_.af("y_scale"), "y_scale"),
                                  zero_point_constant(e_, e_.ai("y_zero_point"), t, "y_zero_point")};
    // Each input's (value, scale, zero point), in the float hook's order (an operand order it chose included).
    std::vector<QdqOperand> triples;
    std::vector<std::string> what;
    // A value given twice (qlinear_add(x, x) with two scales) is each of its positions in turn: the first
    // position not yet written (an operand order the hook swapped pairs them alike, as add and mul commute).
    std::vector<bool> written(inputs().size(), false);
    for (const std::string& v : ins) {
      size_t k = 0;
      while (k < inputs().size() && (written[k] || inputs()[k] != v)) ++k;
      if (k >= inputs().size()) refuse(d_.onnx + " takes the node's inputs only");
      written[k] = true;
      const std::string i = std::to_string(k);
      triples.push_back({v, scale_constant(e_, scales.at(k), "x" + i + "_scale"),
                         zero_point_constant(e_, zps.at(k), t, "x" + i + "_zero_point")});
      what.push_back("x" + i);
    }
    if (qdq) return qdq_node(e_, type, triples, what, y[0], y[1]);
    std::vector<std::string> operands = d_.y_first ? y : std::vector<std::string>{};
    for (const auto& tr : triples) operands.insert(operands.end(), tr.begin(), tr.end());
    if (!d_.y_first) operands.insert(operands.end(), y.begin(), y.end());
    return e_.final_node(d_.onnx, operands).set_domain(kDomain);
  }
  std::pair<OnnxNode*, std::string> helper(const std::string& type, const std::vector<std::string>&,
                                           const std::string&) override {
    refuse(d_.onnx + " has no form with a " + type + " beside it");
  }
  OnnxNode& node(const std::string& type, const std::string&, const std::vector<std::string>&,
                 const std::vector<std::string>&) override {
    refuse(d_.onnx + " has no form with a " + type + " beside it");
  }
  std::string constant(const core::Tensor& t, const std::string& what) override { return e_.constant(t, what); }
  size_t choose(const std::string& what, const std::vector<std::string>& forms) override {
    return e_.choose(what, forms);
  }
  std::string fresh(const std::string& base) override { return e_.fresh(base); }
  const core::Tensor* initializer(const std::string& value) const override { return e_.initializer(value); }
  [[noreturn]] void refuse(const std::string& why) const override {
    e_.refuse(why);
    std::abort();  // not reached: refuse throws
  }

 private:
  OnnxExport& e_;
  const QDef& d_;
};

// The contrib node as the float operator's import hook sees it: its data inputs only, and the float
// operator's type; the node it emits becomes the quantized one, with the scales and zero points read here.
class QuantizedImport final : public OnnxImport {
 public:
  QuantizedImport(OnnxImport& m, const QDef& d) : m_(m), d_(d) {
    if (d.onnx.empty()) {
      // The float ONNX operator on int8/uint8 tensors: their quantization is unknown and kept, so scale 1 and
      // zero point 0 on every input and the output read its integers as they are.
      for (int i = 0; i < m.input_count(); ++i)
        if (m.present(i)) data_.push_back(i), scales_.push_back(1.0), zps_.push_back(0);
      return;
    }
    const int first = d.y_first ? 2 : 0;
    const int triples = (m.input_count() - 2) / 3;
    if (m.input_count() < 5 || (m.input_count() - 2) % 3 != 0)
      m.fail("expects (x, x_scale, x_zero_point) per input and y_scale, y_zero_point");
    for (int k = 0; k < triples; ++k) {
      const int i = first + 3 * k;
      data_.push_back(i);
      const auto [s, zp, t] = import_quant_params(m, i + 1, "x" + std::to_string(k));
      if (t != m.type_of(m.in(i)).dtype) m.fail("input " + std::to_string(k) + "'s zero point has another type");
      scales_.push_back(s), zps_.push_back(zp);
    }
    const auto [ys, yzp, yt] = import_quant_params(m, d.y_first ? 0 : 3 * triples, "y");
    if (yt != m.type_of(m.in(data_[0])).dtype) m.fail("the output's zero point has another type than the input's");
    y_scale_ = ys, y_zp_ = yzp;
  }
  int opset() const override { return m_.opset(); }
  const std::string& op_type() const override { return d_.float_onnx; }
  int input_count() const override { return static_cast<int>(data_.size()); }
  int output_count() const override { return m_.output_count(); }
  const std::string& output(int i) const override { return m_.output(i); }
  const std::string& in(int i) const override { return m_.in(data_.at(static_cast<size_t>(i))); }
  bool present(int i) const override {
    return i < input_count() && m_.present(data_.at(static_cast<size_t>(i)));
  }
  std::vector<std::string> inputs() const override {
    std::vector<std::string> v;
    for (int i : data_) v.push_back(m_.in(i));
    return v;
  }
  bool has(const std::string& a) const override { return m_.has(a); }
  int64_t geti(const std::string& a, int64_t def) const override { return m_.geti(a, def); }
  double getf(const std::string& a, double def) const override { return m_.getf(a, def); }
  std::string gets(const std::string& a, const std::string& def) const override { return m_.gets(a, def); }
  std::vector<int64_t> getints(const std::string& a, std::vector<int64_t> def) const override {
    return m_.getints(a, std::move(def));
  }
  std::vector<std::string> getstrings(const std::string& a) const override { return m_.getstrings(a); }
  const core::Tensor* constant(int i) const override { return m_.constant(data_.at(static_cast<size_t>(i))); }
  const core::Tensor& need_constant(int i, const std::string& what) const override {
    return m_.need_constant(data_.at(static_cast<size_t>(i)), what);
  }
  std::vector<int64_t> const_ints(int i, const std::string& what) const override {
    return m_.const_ints(data_.at(static_cast<size_t>(i)), what);
  }
  double const_scalar(int i, const std::string& what) const override {
    return m_.const_scalar(data_.at(static_cast<size_t>(i)), what);
  }
  const core::TensorType& type_of(const std::string& value) override { return m_.type_of(value); }
  bool output_used(int i) const override { return m_.output_used(i); }
  std::string emit(const std::string& op, const std::vector<std::string>&, const core::Attrs&, const std::string&,
                   bool) override {
    fail(d_.onnx + " has no quantized form of a " + op + " beside it");
  }
  std::string emit_final(const std::string& op, const std::vector<std::string>& ins, const core::Attrs& a) override {
    if (op != d_.float_op) fail(d_.onnx + " read as " + op + ", which has no quantized twin");
    core::Attrs q = a;
    q["x_scales"] = scales_, q["x_zero_points"] = zps_, q["y_scale"] = y_scale_, q["y_zero_point"] = y_zp_;
    q["to"] = core::to_string(m_.type_of(m_.in(data_.at(0))).dtype);
    return m_.emit_final(d_.name, ins, q);
  }
  std::string new_initializer(const std::string& what, core::Tensor t) override {
    return m_.new_initializer(what, std::move(t));
  }
  [[noreturn]] void fail(const std::string& msg) const override {
    m_.fail(msg);
    std::abort();  // not reached: fail throws
  }

 private:
  OnnxImport& m_;
  const QDef& d_;
  std::vector<int> data_;
  std::vector<double> scales_;
  std::vector<int64_t> zps_;
  double y_scale_ = 1;
  int64_t y_zp_ = 0;
};

OpSpec make_qlinear(const QDef& d, const OpSpec& f) {
  OpSpec s;
  s.name = d.name;
  s.doc = (d.onnx.empty() ? "ONNX " + d.float_onnx + " on int8/uint8 (no quantized operator; in and out quantized "
                             "alike, else its QDQ form)"
                           : "ONNX Runtime's " + d.onnx + " (com.microsoft)") +
          ": " + f.name +
          " on dequantized inputs, requantized: y = saturate(round_half_even(" + f.name +
          "((x_i - x_zero_points[i]) * x_scales[i]) / y_scale) + y_zero_point), inputs and output of one type";
  s.min_inputs = f.min_inputs, s.max_inputs = f.max_inputs;
  s.attrs = f.attrs;
  s.attrs.push_back(AttrSpec{"x_scales", core::AttrKind::Floats, AttrValue(std::vector<double>{1.0}),
                             "each data input's quantization scale (float32, > 0)", {}, FLT_MIN, FLT_MAX,
                             {AttrValue(std::vector<double>{0.0})}});
  s.attrs.push_back(AttrSpec{"x_zero_points", core::AttrKind::Ints, AttrValue(std::vector<int64_t>{0}),
                             "each data input's zero point, a value of its type", {}, -128, 255,
                             {AttrValue(std::vector<int64_t>{256})}});
  for (auto& a : quant_attrs("y_")) s.attrs.push_back(a);
  s.attrs.push_back(quant_type_attr("to"));
  s.infer = [d, &f](const std::vector<TensorType>& in, const Attrs& a) {
    const DType t = quant_dtype(a, "to");
    const auto& scales = scales_of(a);
    const auto& zps = zero_points_of(a);
    QUORUM_REQUIRE(scales.size() == in.size() && zps.size() == in.size(),
                   d.name + " needs one scale and one zero point per input (" + std::to_string(in.size()) +
                       "), got " + std::to_string(scales.size()) + " and " + std::to_string(zps.size()));
    std::vector<TensorType> fin = in;
    for (size_t i = 0; i < in.size(); ++i) {
      QUORUM_REQUIRE(in[i].dtype == t, d.name + " takes inputs of one type, got " + core::to_string(t) + " and " +
                                           core::to_string(in[i].dtype));
      QUORUM_REQUIRE(core::representable(t, static_cast<double>(zps[i])),
                     "x_zero_points[" + std::to_string(i) + "] " + std::to_string(zps[i]) + " is not a " +
                         core::to_string(t) + " value");
      fin[i].dtype = DType::F32;
    }
    check_zero_point(a, "y_zero_point", t);
    Signature sig = f.infer(fin, a);
    QUORUM_REQUIRE(sig.params.empty(), d.name + ": the float operator has weights");
    for (auto& o : sig.outputs) o.dtype = t;
    return sig;
  };
  s.forward = [d, &f](const Inputs& in, const Attrs& a) {
    const auto& scales = scales_of(a);
    const auto& zps = zero_points_of(a);
    // A selection of inputs quantized as the output: the input integers themselves, no requantization.
    if (d.selects && same_quantization(a)) return f.forward(in, a);
    const double ys = quant_scale(a, "y_scale"), yzp = static_cast<double>(core::attr_i(a, "y_zero_point"));
    bool exact = d.linear && power_of_two(ys);
    for (double sc : scales) exact = exact && power_of_two(f32(sc));
    std::vector<Tensor> deq;
    deq.reserve(in.size());
    Inputs fin;
    for (size_t i = 0; i < in.size(); ++i) {
      Tensor x(DType::F64, in[i]->shape());
      const double scale = f32(scales[i]), zp = static_cast<double>(zps[i]);
      for (int64_t k = 0; k < x.numel(); ++k) {
        const double v = (in[i]->f64()[k] - zp) * scale;
        x.f64()[k] = exact ? v : stored(v);
      }
      deq.push_back(std::move(x));
    }
    for (const Tensor& x : deq) fin.push_back(&x);
    std::vector<Tensor> out = f.forward(fin, a);
    const DType to = quant_dtype(a, "to");
    for (Tensor& y : out)
      for (int64_t k = 0; k < y.numel(); ++k) {
        const double r = y.f64()[k] / ys;
        const bool held = exact && std::abs(r) <= FLT_MAX && f32(r) == r && f32(r + yzp) == r + yzp;
        y.f64()[k] = requantize(held ? r : stored(stored(y.f64()[k]) / ys), yzp, to);
      }
    return out;
  };
  quantized_output(s);
  // Read by gen::quantize_model, which then quantizes the output as the input most of the time, as tools do.
  if (d.selects) s.tags.push_back("keeps_quantization");
  s.fit_attrs = f.fit_attrs;
  s.repair_attrs = f.repair_attrs;
  s.prepare_merge = f.prepare_merge;
  s.widen_batch = f.widen_batch;
  s.mixes_batch = f.mixes_batch;
  s.sample = [d, &f](core::Rng& rng) {
    Case c = f.sample(rng);
    const std::string type = rng.bernoulli(0.5) ? "int8" : "uint8";
    std::vector<double> scales;
    std::vector<int64_t> zps;
    for (auto& t : c.inputs) {
      t.dtype = type == "int8" ? DType::I8 : DType::U8;
      scales.push_back(draw_scale(rng));
      zps.push_back(draw_zero_point(rng, type));
    }
    c.gen.clear();
    c.attrs["x_scales"] = scales;
    c.attrs["x_zero_points"] = zps;
    c.attrs["y_scale"] = rng.bernoulli(0.1) ? draw_scale(rng) : f32(d.y_scale(rng, scales));
    c.attrs["y_zero_point"] = draw_zero_point(rng, type);
    if (d.selects && rng.bernoulli(0.8)) c.attrs["y_scale"] = f32(scales.at(0)), c.attrs["y_zero_point"] = zps.at(0);
    c.attrs["to"] = type;
    return c;
  };
  s.onnx_export = [d, &f](OnnxExport& e) {
    QuantizedExport q(e, d);
    f.onnx_export(q);
  };
  const std::string onnx_type = d.onnx.empty() ? "quantized." + d.float_onnx : std::string(kDomain) + "." + d.onnx;
  s.onnx_import = {{{onnx_type}, [d, &f](OnnxImport& m) {
                      QuantizedImport q(m, d);
                      f.onnx_import.at(0).hook(q);
                    }}};
  return s;
}

double pow2(core::Rng& rng, int lo, int hi) { return std::exp2(static_cast<double>(rng.randint(lo, hi))); }

}  // namespace

void register_qlinear(Registry& r) {
  // The largest input scale times 2^k: a sum, an average, a selection or a piecewise-linear function of the
  // inputs keeps their size.
  auto like_inputs = [](core::Rng& rng, const std::vector<double>& s) {
    return *std::max_element(s.begin(), s.end()) * pow2(rng, -1, 1);
  };
  const std::vector<QDef> defs = {
      {"qlinear_add", "add", "QLinearAdd", "Add", false, true, like_inputs},
      // A product of two quantized values spans 255^2 steps of a_scale * b_scale.
      {"qlinear_mul", "mul", "QLinearMul", "Mul", false, true,
       [](core::Rng& rng, const std::vector<double>& s) { return s.at(0) * s.at(1) * 64 * pow2(rng, -2, 2); }},
      {"qlinear_avg_pool2d", "avg_pool2d", "QLinearAveragePool", "AveragePool", false, false, like_inputs},
      {"qlinear_global_avg_pool", "global_avg_pool", "QLinearGlobalAveragePool", "GlobalAveragePool", false,
       false, like_inputs},
      // No QLinearMaxPool: ONNX MaxPool on the quantized tensor (QDef::onnx empty).
      {"qlinear_max_pool2d", "max_pool2d", "", "MaxPool", false, true, like_inputs, true},
      {"qlinear_concat", "concat", "QLinearConcat", "Concat", true, true, like_inputs},
      {"qlinear_leaky_relu", "leaky_relu", "QLinearLeakyRelu", "LeakyRelu", false, false, like_inputs},
      // Tools give a sigmoid's output the scale 1/256 (its range [0, 1] in 256 steps).
      {"qlinear_sigmoid", "sigmoid", "QLinearSigmoid", "Sigmoid", false, false,
       [](core::Rng& rng, const std::vector<double>&) { return pow2(rng, -9, -7); }},
  };
  for (const QDef& d : defs) {
    const OpSpec* f = r.find(d.float_op);
    QUORUM_CHECK(f && f->forward && f->sample && f->onnx_export && !f->onnx_import.empty(),
                 "qlinear: no float operator " + d.float_op);
    r.add(make_qlinear(d, *f));
  }
}

}  // namespace quorum::ops
