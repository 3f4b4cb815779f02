// The operator extension point. An operator is one OpSpec in its family file (src/ops/<family>.cpp)
// and nothing else in the core: name, arity, attribute domains (valid and deliberately invalid
// values), a shape rule whose failures are named reasons, a float64 forward kernel, its
// vector-Jacobian product, tolerances, valid operand ranges for vulnerable operations, and a
// sampler that draws valid test cases from the domain.
#pragma once
#include <functional>
#include <optional>
#include <limits>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace quorum::ops {

class OnnxExport;  // ops/onnx_map.h
class OnnxImport;

using core::AttrKind;
using core::Attrs;
using core::AttrValue;
using core::DType;
using core::Shape;
using core::Tensor;
using core::TensorType;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kUnbounded = -1;

// The domain of one attribute. Valid values are `choices` when given, otherwise every value (or,
// for list kinds, every element) in [lo, hi]. `invalid` lists deliberately invalid values that an
// invalid-parameter campaign feeds to libraries; every library should reject them.
struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::Int;
  AttrValue default_value;
  std::string doc;
  std::vector<AttrValue> choices;
  double lo = -kInf, hi = kInf;
  std::vector<AttrValue> invalid;
  // An option whose use changes the operator's rule (resize's given scales, a recurrent cell's clip,
  // LSTM's coupled forget gate): a finding's signature records it only where it differs from its
  // default, as name="given" (its value where it has choices), so the signatures of the default rule
  // stay what they were.
  bool keyed_when_given = false;
};

// How the generator should initialise a weight (a parameter input).
enum class Init { Normal, Zeros, Ones, Positive };

struct ParamSpec {
  std::string name;  // e.g. "weight", "bias"
  TensorType type;
  Init init = Init::Normal;
};

// What a shape rule returns for valid inputs: output types and the parameter (weight) inputs the
// node must carry after its data inputs.
struct Signature {
  std::vector<TensorType> outputs;
  std::vector<ParamSpec> params;
};

// The valid range of a vulnerable operation's operand (GRIST): input `input` must lie in (lo, hi)
// (bounds included when the flags say so); `why` names what goes wrong outside.
struct ValidRange {
  int input = 0;
  double lo = -kInf, hi = kInf;
  bool lo_inclusive = false, hi_inclusive = false;
  std::string why;
};

// An interval holding every element of a value, for the static value-range analysis (DEBAR, GRIST's
// baseline; src/ref/ranges.h). Ends are closed; an unbounded end is -kInf or kInf. NaN is not an
// element: an operator that may produce NaN (a log of a negative) gives an unbounded interval there.
struct Interval {
  double lo = -kInf, hi = kInf;
  bool bounded() const { return lo > -kInf && hi < kInf; }
  bool contains(double v) const { return lo <= v && v <= hi; }
};
// An operator's range rule: an interval for each output, given an interval for each input (data
// inputs, then parameters) and the input types. Must be sound: every value the forward kernel can
// produce from inputs in the given intervals lies in the result. Null: every output unbounded.
using RangeFn = std::function<std::vector<Interval>(const std::vector<Interval>& in,
                                                    const std::vector<TensorType>& types, const Attrs& attrs)>;
// Interval arithmetic for the range rules (sound, with inf - inf and 0 * inf resolved to the
// widest and to 0, as limits of finite values): the smallest interval holding both; a + b; a - b;
// a * b; a / b (unbounded when b holds 0); a sum of `terms` elements each in `a`; f over `x` for
// an f that increases (decreases) on the whole interval, the ends evaluated at +-1e300 for infinite
// ones and a NaN end widened to infinity; f over x for an f that decreases up to `at` and increases
// after it, with `min_value` at most its minimum.
Interval hull(const Interval& a, const Interval& b);
Interval add(const Interval& a, const Interval& b);
Interval sub(const Interval& a, const Interval& b);
Interval mul(const Interval& a, const Interval& b);
Interval div(const Interval& a, const Interval& b);
Interval sum_of(const Interval& a, double terms);
Interval increasing(const Interval& x, const std::function<double(double)>& f);
Interval decreasing(const Interval& x, const std::function<double(double)>& f);
Interval valley(const Interval& x, const std::function<double(double)>& f, double at, double min_value);
// Range rules shared by families: every output within the hull of all inputs (reshaping, pooling
// by maximum, selection); the same with 0 in it (zero padding, averages over padded windows).
std::vector<Interval> hull_of_inputs(const std::vector<Interval>& in, const std::vector<TensorType>& types,
                                     const Attrs& attrs);
std::vector<Interval> hull_of_inputs_and_zero(const std::vector<Interval>& in, const std::vector<TensorType>& types,
                                              const Attrs& attrs);

struct Tolerance {
  double atol = 0, rtol = 0;
};

// How the values of one data input are drawn in tests and generated data.
enum class Fill { Uniform, OneHot, Probability };
struct InputGen {
  double lo = -2.0, hi = 2.0;
  Fill fill = Fill::Uniform;  // OneHot / Probability: over the last axis
  // > 0 (uniform fill): a quarter of the values snapped to (k + 1/2) * tie_grid, the ties of a quantization at
  // that scale, when it is a power of two (where the ties are exact in float32, and judged).
  double tie_grid = 0;
};

// One valid parameter case drawn from an operator's domain.
struct Case {
  std::vector<TensorType> inputs;  // data inputs only
  Attrs attrs;
  std::vector<InputGen> gen;  // per data input; missing entries use InputGen{}
};

using Inputs = std::vector<const Tensor*>;  // data inputs then parameters, all float64
using ForwardFn = std::function<std::vector<Tensor>(const Inputs& in, const Attrs& attrs)>;
// Given inputs, outputs and the gradient of a scalar with respect to each output, returns the
// gradient with respect to each input (an undefined Tensor for inputs listed as nondiff).
using VjpFn = std::function<std::vector<Tensor>(const Inputs& in, const Attrs& attrs,
                                                const std::vector<Tensor>& out,
                                                const std::vector<Tensor>& grad_out)>;
using InferFn = std::function<Signature(const std::vector<TensorType>& data_in, const Attrs& attrs)>;

// What a generator's merge-input preparation (`OpSpec::prepare_merge`) may do to the data inputs
// it is about to join: read their shapes, and bring one to a rank or a shape through the
// generator's own reshaping nodes. Implemented by the generators' builder.
class InputShaper {
 public:
  virtual ~InputShaper() = default;
  virtual size_t count() const = 0;
  virtual const Shape& shape(size_t i) const = 0;
  virtual void to_rank(size_t i, int rank) = 0;
  virtual void to_shape(size_t i, const Shape& target) = 0;
  virtual core::Rng& rng() = 0;
  virtual int64_t max_elems() const = 0;  // the largest value a generated model may hold
};

// The working precision of a kernel's intermediates. The kernels compute in float64; a float32
// implementation of the same operator holds some intermediates in float32 (a cell's gates and
// states, a normalisation's mean and variance, a softmax's sum, an interpolation coordinate), and
// rounding one of them can change the result by far more than the result's own rounding: a
// saturated gate y = 1 gives the derivative 1 - y*y = 0, an intermediate product overflows, a
// normalised value of a constant row is a difference of two large products. A kernel marks such a
// value with stored(v), or stored_sum(sum, magnitude, terms) for a sum, or statistic_sum(sum,
// magnitude, terms) for a row's statistic (a mean), or rounded(v) for a value a float32
// implementation rounds but whose rounding error the operands' perturbation already covers.
// Outside a StoredPrecision scope all four return the value; inside one (the oracle's sensitivity
// trials) they round it to float32 when the scope says so and, when the scope jitters, move stored
// values and sums by their rounding error: one unit for a value, sum_units(terms) units of the
// terms' magnitude for a sum (its rounding grows with its terms, not its result: cancellation).
// A scope with a direction (-1 or +1) moves every one by that whole error in that direction, so
// the worst case of one rounding (a constant row's normalised value, a coordinate on an exact
// tie) is in every such trial whatever the draws; with `by_lane`, values a kernel marks in an odd
// lane move the other way (a nearest resize's height and width coordinates, lanes 0 and 1, may
// round to opposite sides); a scope without a direction moves each by a random fraction of it,
// drawn from the scope's Rng (Monte Carlo arithmetic). A statistic is rounded and
// moved only in scopes that move statistics: a trial that keeps it keeps it exact, so a constant
// row's variance is zero, as in implementations whose mean of equal values is exact; the others
// round and move it, as a float32 sum of equal values in order does (then the variance is the
// square of the mean's error). A sum whose magnitude, with its rounding error, exceeds float32's
// range is NaN when rounding to float32: a partial sum may overflow, depending on the order. Per
// thread; scopes do not nest.
class StoredPrecision {
 public:
  StoredPrecision(bool round_to_f32, double unit, bool jitter, bool move_statistics, core::Rng& rng,
                  int direction = 0, bool by_lane = false);
  ~StoredPrecision();
  StoredPrecision(const StoredPrecision&) = delete;
  StoredPrecision& operator=(const StoredPrecision&) = delete;
};
double stored(double v);
double stored_sum(double sum, double magnitude, int64_t terms, int lane = 0);
double statistic_sum(double sum, double magnitude, int64_t terms);
double rounded(double v);
// A product of factors in an order the implementation chooses: its partial products lie between
// `smallest` (the product of the nonzero factors below 1 in size; 1 with a zero factor) and
// `largest` (of those above 1). Where either leaves float32's normal range, some order overflows
// (inf, or inf * 0 = NaN) or loses its digits to underflow, so rounding to float32 makes it NaN
// (the spread then accepts any value there: the result depends on the order); otherwise rounded.
double stored_product(double product, double largest, double smallest);
// An intermediate of magnitude `magnitude` that float32 implementations hold although the kernel's
// formula avoids it (libtorch's normalisation backward sums dy * x where the catalogue sums
// dy * xhat): 0, or NaN under float32 rounding when the magnitude is beyond float32's range (add it
// to what the implementation derives from it, so the spread accepts any value there).
double float32_range(double magnitude);
// A positive intermediate exp(log_v) that float32 implementations hold (a softmax probability that
// log_softmax computed as log(softmax(x)) takes the log of): 0, or NaN under float32 rounding when
// it is below 2^-118, eight binades above float32's smallest normal: implementations that flush
// subnormals, or whose fast exp flushes before the normal range ends, hold 0 there and its log is
// -inf (OpenCV 4.6's softmax, measured: 0 below exp(-82.6957) = 1.2e-36, about 2^-119.3).
double float32_underflow(double log_v);
// The rounding error of a float32 sum of `terms` terms, in units of the terms' magnitude: none for
// one term, sqrt(terms) for independent rounding errors, and terms / 4 where that is larger: the
// errors of equal terms (a constant row, common after clipping) add up instead of cancelling
// (measured: a float32 sum in order of L equal values errs by up to 0.24 L units, L = 16..4096).
double sum_units(int64_t terms);

// A kernel's float32 evaluation: its own formula computed in float32 arithmetic, every intermediate a
// float32 (a product or a running sum past FLT_MAX is inf, inf * 0 NaN, a sum of opposite infinities NaN),
// in one of the evaluation orders libraries use where they differ: products summed in order, or each added
// by a fused multiply-add (oneDNN's and XNNPACK's JIT kernels); a plain sum's terms in order, or dealt in
// turn to kSumLanes running sums that are then added in order (a vectorised loop and its horizontal add:
// 60 copies of FLT_MAX / 60, whose exact sum is FLT_MAX, give inf there and FLT_MAX in order). Inside a
// Float32Evaluation scope, an operator that lists the scope's order in OpSpec::float32_orders computes its
// forward and VJP that way: operands read as float32, results widened into the usual float64 tensors;
// outside one, in float64 with the marks above. The oracle's spread runs one such trial per listed order
// (oracle/spread.h), so a NaN, Inf or value that the float32 evaluation reproduces is float32's without a
// mark on that intermediate.
// Per thread; scopes do not nest.
enum class Float32Order : int8_t { kInOrder, kFused, kLanes };
inline constexpr int kSumLanes = 16;  // an AVX-512 register of floats
// "float32, products summed in order" / "float32, fused multiply-add" / "float32, 16 lanes then a horizontal
// sum".
const char* float32_order_name(Float32Order order);
class Float32Evaluation {
 public:
  explicit Float32Evaluation(Float32Order order);
  ~Float32Evaluation();
  Float32Evaluation(const Float32Evaluation&) = delete;
  Float32Evaluation& operator=(const Float32Evaluation&) = delete;
};
// The order of the enclosing Float32Evaluation scope; nullopt outside one (the float64 kernel).
std::optional<Float32Order> float32_evaluation();

struct OpSpec {
  std::string name;
  std::string family;
  std::string doc;
  int min_inputs = 1, max_inputs = 1;  // data inputs; max kUnbounded = any number
  std::vector<AttrSpec> attrs;
  InferFn infer;  // throws core::OpError(reason) through core::require
  ForwardFn forward;
  VjpFn vjp;  // null: not differentiable
  // The orders its forward and VJP evaluate in float32 (Float32Evaluation); empty: float64 with marks only.
  std::vector<Float32Order> float32_orders;
  std::vector<int> nondiff_inputs;  // e.g. a loss's target
  Tolerance tol_f32{1e-5, 1e-4};
  Tolerance tol_f64{1e-12, 1e-10};
  // Length of the longest sum inside one output element (conv: C/g·kH·kW); tolerances grow with
  // its square root. Null means 1.
  std::function<int64_t(const std::vector<TensorType>&, const Attrs&)> reduction_length;
  std::vector<ValidRange> valid_ranges;
  // The static value-range rule (Interval, above); null: outputs unbounded.
  RangeFn range;
  // Operators that route an output's gradient to the input that attains an extreme (max pooling,
  // maximum, reduce_max, ...): for each element of data input `input`, kNotExtreme, kSoleExtreme
  // or kTiedExtreme (the most any of its groups gives). Among tied elements the choice is a
  // convention (libtorch splits, the catalogue and others pick the first), and two backends whose
  // inputs agree within tolerance may order near-equal elements differently; a gradient that
  // differs only at tied elements, or at elements whose status differs between the backends, is
  // not a bug. kTiedWithPadding: tied with a padded cell of its window too (max pooling's padding is
  // -inf, so it ties a window whose input cells are all -inf): a library that pads explicitly may send
  // that window's gradient to the padding, that is nowhere, so the input's gradient total is not kept.
  enum Extreme : int8_t { kNotExtreme = 0, kSoleExtreme = 1, kTiedExtreme = 2, kTiedWithPadding = 3 };
  std::function<std::vector<int8_t>(const Inputs& in, const Attrs& attrs, size_t input)> extremes;
  // Elementwise operators whose derivative at a kink is a convention that libraries do not share
  // (clip at its bounds, abs at 0): at such an input x, the two one-sided derivatives, lower first.
  // A gradient between them is not a bug. Null, or nullopt away from the kinks.
  std::function<std::optional<std::pair<double, double>>(double x, const Attrs& attrs)> kink_derivatives;
  // Generator hooks, for what the generic rules of src/gen/params.cpp cannot derive from the
  // attribute domains. Null: the generic rules.
  // fit_attrs: attributes fitted to the shape `x` of the first data input (squeeze's unit axes,
  // layer_norm's axis past the batch axis), drawn from `rng`; `max_rank` bounds the output's rank.
  std::function<void(const Shape& x, core::Rng& rng, int max_rank, Attrs& a)> fit_attrs;
  // repair_attrs: after the shape rule rejected the canonical `a`, a change that makes it valid
  // (clip: min > max); false when there is none.
  std::function<bool(Attrs& a)> repair_attrs;
  // prepare_merge: brings a merge's data inputs to shapes the shape rule accepts (matmul's K,
  // concat's other axes), fixing attributes in `fixed` that the fit decided; false when these
  // inputs cannot be joined. Null: elementwise merges (one shape, or shapes that broadcast).
  std::function<bool(InputShaper& in, Attrs& fixed)> prepare_merge;
  std::function<Case(core::Rng&)> sample;
  // The batch relation (campaign::wide_case): the node's attributes once the model's batch (axis 0 of its
  // samples) is widened from `from` to `to`, where an attribute spells that size out (reshape's target
  // shape). Null: no attribute names the batch. The float64 reference then tells whether the widened node
  // still keeps each sample to itself.
  std::function<void(int64_t from, int64_t to, Attrs& a)> widen_batch;
  // Whether the node's output for one sample depends on the other samples of its batch (axis 0 of its
  // first input): training-mode statistics, a softmax, normalisation or reduction over axis 0. The batch
  // relation never judges such a node or what follows it, even where the reference's rows happen to equal
  // the model's run (a training-mode batch_norm of a constant input gives its bias whatever the batch).
  // Null: never.
  std::function<bool(const std::vector<TensorType>& in, const Attrs& a)> mixes_batch;
  // The ONNX mapping (ops/onnx_map.h). Export writes the node (or a decomposition); null: the
  // operator has no ONNX counterpart. Import entries map ONNX operator types to a hook that emits
  // catalogue nodes for one ONNX node (several types may map to one operator, one type may give a
  // small subgraph); each ONNX type belongs to one entry in the whole catalogue. An operator of ONNX
  // Runtime's contrib set is named "com.microsoft.<type>".
  std::function<void(OnnxExport&)> onnx_export;
  struct OnnxImportEntry {
    std::vector<std::string> op_types;
    std::function<void(OnnxImport&)> hook;
  };
  std::vector<OnnxImportEntry> onnx_import;
  bool is_loss = false;
  // A quantized operator (int8/uint8 values, ops/quant_util.h): drawn only into quantized models
  // (gen::quantize), never by the float generators.
  bool is_quantized = false;
  // "activation", "reshaping", "vulnerable", "pool", ...; "squares": computes sums of squares of its
  // operands (variances, squared errors), so a float32 computation overflows once an operand
  // exceeds sqrt(FLT_MAX / reduction length) although the result fits.
  std::vector<std::string> tags;

  bool multi_input() const { return max_inputs != 1; }
  bool differentiable() const { return static_cast<bool>(vjp); }
  bool has_tag(const std::string& t) const;
  const AttrSpec* attr(const std::string& name) const;
  // The tolerance for comparing a `dtype` result of this op against the float64 reference.
  Tolerance tolerance(DType dtype, const std::vector<TensorType>& data_in, const Attrs& attrs) const;
};

// Gradients sum over more terms than the forward pass (batch and spatial positions): they are
// compared with ten times the operator's forward tolerance.
Tolerance backward_tolerance(Tolerance forward);

// Attribute-spec builders, so family files read as tables.
AttrSpec int_attr(std::string name, int64_t def, double lo, double hi, std::vector<AttrValue> invalid,
                  std::string doc);
AttrSpec float_attr(std::string name, double def, double lo, double hi, std::vector<AttrValue> invalid,
                    std::string doc);
AttrSpec ints_attr(std::string name, std::vector<int64_t> def, double lo, double hi,
                   std::vector<AttrValue> invalid, std::string doc);
AttrSpec enum_attr(std::string name, std::string def, std::vector<std::string> choices,
                   std::vector<std::string> invalid, std::string doc);
AttrSpec int_enum_attr(std::string name, int64_t def, std::vector<int64_t> choices,
                       std::vector<int64_t> invalid, std::string doc);
// The attribute, keyed in a finding's signature only where it differs from its default (AttrSpec::keyed_when_given).
inline AttrSpec keyed_when_given(AttrSpec a) {
  a.keyed_when_given = true;
  return a;
}

// Fills defaults for omitted attributes, converts int→float where a float is expected, and checks
// every value against its domain. Throws OpError naming the attribute on an unknown name, a wrong
// kind or a value outside the domain (unless allow_invalid, used by invalid-parameter campaigns).
Attrs canonical_attrs(const OpSpec& spec, const Attrs& given, bool allow_invalid = false);

}  // namespace quorum::ops
