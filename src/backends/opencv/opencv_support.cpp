// Support rules of the OpenCV DNN backend (see opencv_support.h). Every "no" below was measured on
// OpenCV 4.6.0 with the ONNX the Quorum exporter writes (opset 14 unless the rule names the opset or
// the exchange form): the importer refuses the form,
// the layer throws at run time, or it returns wrong values (those are listed with minimal cases in
// known_differences.json, so campaigns are not flooded by one known defect).
#include "backends/opencv/opencv_support.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "ops/kernel_util.h"
#include "ops/quant_util.h"
#include "ops/registry.h"

namespace quorum::backends::opencv {
namespace {

using Rule = std::function<Support(const ir::Graph&, const ir::Node&)>;

thread_local const ModelForms* t_model_forms = nullptr;  // the innermost ModelForms on this thread

// The model's exchange forms while a node is judged (node_support puts the model's ModelForms in scope), or
// null when the exporter refuses the model.
const ir::OnnxExported* model_forms() { return t_model_forms ? t_model_forms->forms() : nullptr; }
int opset() { return model_forms() ? model_forms()->opset : 14; }
// Whether the node was written with `entry` ("softmax=decomposed").
bool form_has(const ir::Node& n, const std::string& entry) {
  const ir::OnnxExported* f = model_forms();
  if (!f) return false;
  const auto it = f->forms.find(n.name);
  return it != f->forms.end() && ("," + it->second + ",").find("," + entry + ",") != std::string::npos;
}

const core::Shape& shape_of(const ir::Graph& g, const std::string& v) { return g.types.at(v).shape; }
int64_t rank_of(const ir::Graph& g, const std::string& v) { return static_cast<int64_t>(shape_of(g, v).size()); }
int64_t ai(const ir::Node& n, const std::string& k) { return core::attr_i(n.attrs, k); }
const std::string& as(const ir::Node& n, const std::string& k) { return core::attr_s(n.attrs, k); }
const std::vector<int64_t>& aints(const ir::Node& n, const std::string& k) { return core::attr_ints(n.attrs, k); }

std::string str(const std::vector<int64_t>& v) { return core::to_string(core::Shape(v.begin(), v.end())); }

Support yes(const ir::Graph&, const ir::Node&) { return Support::yes(); }

// Elementwise maps OpenCV runs on blobs of any shape, including rank 0 and 1 (fed as [n, 1]).
const std::set<std::string>& shape_agnostic_ops() {
  static const std::set<std::string> s = {"relu",  "sigmoid", "tanh",       "softplus",   "softsign",     "exp",
                                          "log",   "sqrt",    "reciprocal", "abs",        "neg",          "elu",
                                          "selu",  "pow",     "rsqrt",      "leaky_relu", "hard_sigmoid", "hardswish",
                                          "reshape", "unsqueeze"};
  return s;
}

// Total SAME padding of each spatial axis (the catalogue's ops::resolve_pads on the dilated window).
std::vector<int64_t> same_total_pads(const ir::Graph& g, const ir::Node& n, bool dilated) {
  const auto& k = aints(n, "kernel_shape");
  std::vector<int64_t> eff(k.size());
  for (size_t i = 0; i < k.size(); ++i) eff[i] = (dilated ? aints(n, "dilations")[i] : 1) * (k[i] - 1) + 1;
  const ops::Pads p =
      ops::resolve_pads(as(n, "auto_pad"), aints(n, "pads"), shape_of(g, n.inputs[0]), eff, aints(n, "strides"));
  std::vector<int64_t> total;
  for (size_t i = 0; i < k.size(); ++i) total.push_back(p.begin[i] + p.end[i]);
  return total;
}

// auto_pad rules shared by convolutions and pools.
Support auto_pad_support(const ir::Graph& g, const ir::Node& n, bool dilated) {
  const std::string& mode = as(n, "auto_pad");
  if (mode != "SAME_UPPER" && mode != "SAME_LOWER") return Support::yes();
  const auto& k = aints(n, "kernel_shape");
  if (dilated)
    for (size_t i = 0; i < k.size(); ++i)
      if (aints(n, "dilations")[i] > 1 && k[i] > 1)
        return Support::no("OpenCV 4.6 computes auto_pad=" + mode +
                           " padding without the dilation (wrong values when dilations > 1)");
  if (mode == "SAME_LOWER")
    for (int64_t t : same_total_pads(g, n, dilated))
      if (t % 2 != 0)
        return Support::no("OpenCV 4.6 treats auto_pad=SAME_LOWER as SAME_UPPER: with an odd total padding (" +
                           std::to_string(t) + ") the extra cell lands at the end (wrong values)");
  return Support::yes();
}

bool symmetric_pads(const std::vector<int64_t>& pads) {
  const size_t d = pads.size() / 2;
  for (size_t i = 0; i < d; ++i)
    if (pads[i] != pads[d + i]) return false;
  return true;
}

// Exchange forms 4.6 cannot read (measured on the seed-2314 campaign's models): Conv without
// kernel_shape (ONNX infers it from W), Gemm with transB=0 and a constant B or with transA=1, and Gemm
// with alpha or beta other than 1 (importer bugs, ledger entries opencv-conv-kernel-shape-required,
// opencv-gemm-const-b-transb0 and opencv-gemm-alpha-beta-ignored, whose cases force the form through the
// variant), and the softmax decomposition's broadcast Sub/Div of computed inputs
// (the known broadcast limitation, a ledger note).
Support form_support(const ir::Node& n, const Variant& v) {
  auto unforced = [&](const std::string& entry) {
    return form_has(n, entry) && std::find(v.forms.begin(), v.forms.end(), entry) == v.forms.end();
  };
  if (unforced("attrs=minimal") && (n.op.rfind("conv", 0) == 0 || n.op == "qlinear_conv2d"))
    return Support::no("OpenCV 4.6's importer needs Conv's kernel_shape, which ONNX lets it infer from the weight "
                       "('kernel_size (or kernel_h and kernel_w) not specified' in getKernelSize); exchange form "
                       "attrs=minimal");
  if (unforced("defaults=omitted") && n.op == "qlinear_leaky_relu")
    return Support::no("OpenCV 4.6's importer needs QLinearLeakyRelu's alpha, whose default (0.01) ONNX Runtime's "
                       "contrib operator lets it leave out ('Required argument \"alpha\" not found'); exchange form "
                       "defaults=omitted");
  if (unforced("attrs=minimal") && n.op == "qlinear_avg_pool2d")
    return Support::no("OpenCV 4.6's int8 average pooling takes a QLinearAveragePool without ceil_mode as ceil_mode=1 "
                       "(ledger entry opencv-qlinear-avg-pool-ceil-mode-default); exchange form attrs=minimal");
  if (unforced("qlinear=qdq") && (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul"))
    return Support::no("OpenCV 4.6's importer fails on DequantizeLinear of a constant weight (ledger entry "
                       "opencv-qdq-constant-weight-dequantize); exchange form qlinear=qdq");
  if (unforced("qlinear=integer") && (n.op == "qlinear_conv2d" || n.op == "qlinear_matmul"))
    return Support::no("OpenCV 4.6's importer has no ConvInteger or MatMulInteger layer ('Can't create layer ... of "
                       "type \"ConvInteger\"' in getLayerInstance, measured); exchange form qlinear=integer");
  if (unforced("gemm=gemm_pretransposed"))
    return Support::no("OpenCV 4.6 fails on Gemm with transB=0 and a constant B ('srcMat.cols == weights.cols' "
                       "in fully_connected_layer.cpp:181); exchange form gemm=gemm_pretransposed");
  if (unforced("gemm=gemm_transA"))
    return Support::no("OpenCV 4.6's importer ignores Gemm's transA=1 (the same 'srcMat.cols == weights.cols' "
                       "assertion at forward); exchange form gemm=gemm_transA");
  if (unforced("gemm=gemm_scaled"))
    return Support::no("OpenCV 4.6's importer ignores Gemm's alpha and beta with a constant B (it computes A B^T + C); "
                       "exchange form gemm=gemm_scaled");
  if (unforced("matmul=a_vector") || unforced("matmul=b_vector"))
    return Support::no("OpenCV 4.6 reads a MatMul with a 1-D operand (Squeeze, MatMul, Unsqueeze) only as a computed "
                       "row times a constant matrix at opsets 11 and 12: from 13 Squeeze's axes input fails "
                       "('node_proto.input_size() == 1'), a squeezed constant fails ('axis <= inpShape.size()' in "
                       "parseSqueeze), two computed operands fail in fully_connected_layer.cpp:125; exchange forms "
                       "matmul=a_vector and matmul=b_vector");
  if (unforced("slice=crop"))
    return Support::no("OpenCV 4.6's Pad refuses negative pads, ONNX's crop ('paddings[i].first >= 0' in "
                       "padding_layer.cpp:50, at import); exchange form slice=crop");
  if (unforced("softmax=decomposed"))
    return Support::no("the decomposed (Log)Softmax subtracts a ReduceMax(keepdims=1) from its input: a broadcast of "
                       "two computed inputs, which OpenCV 4.6 fails ('start <= (int)shape.size()' in total); exchange "
                       "form softmax=decomposed");
  return Support::yes();
}

Support conv(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "conv1d" && as(n, "auto_pad") == "NOTSET" && !symmetric_pads(aints(n, "pads")))
    return Support::no("OpenCV 4.6 pads a 1-D convolution by the begin pad on both ends (pads " +
                       str(aints(n, "pads")) + " give the wrong output length)");
  return auto_pad_support(g, n, true);
}

Support conv_transpose(const ir::Graph&, const ir::Node& n) {
  const auto& pads = aints(n, "pads");
  if (!symmetric_pads(pads))
    return Support::no("OpenCV 4.6 refuses asymmetric ConvTranspose pads " + str(pads) +
                       " ('Unsupported asymmetric padding in convolution layer')");
  const auto& k = aints(n, "kernel_shape");
  const auto& s = aints(n, "strides");
  const auto& d = aints(n, "dilations");
  const auto& op = aints(n, "output_padding");
  for (size_t i = 0; i < k.size(); ++i) {
    if (op[i] >= s[i])
      return Support::no("OpenCV 4.6 requires output_padding < stride ('adjust_pads[i] < strides[i]'); ONNX allows "
                         "output_padding " + str(op) + " with strides " + str(s) + " and dilations " + str(d));
    if (d[i] > 1 && k[i] > 1)
      return Support::no("OpenCV 4.6's deconvolution ignores dilations " + str(d) +
                         " (its output has the undilated size)");
  }
  return Support::yes();
}

Support pool(const ir::Graph& g, const ir::Node& n) {
  if (n.attrs.count("dilations")) {
    const auto& d = aints(n, "dilations");
    if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v != 1; }))
      return Support::no("OpenCV 4.6's ONNX importer ignores MaxPool dilations " + str(d) +
                         " (the pool runs undilated: another output shape with explicit pads, other values with "
                         "auto_pad SAME)");
  }
  const std::string& mode = as(n, "auto_pad");
  const bool one_d = n.op.find("1d") != std::string::npos;
  if (one_d && (mode == "SAME_UPPER" || mode == "SAME_LOWER"))
    return Support::no("OpenCV 4.6 cannot run a 1-D pool with auto_pad=" + mode +
                       " ('kernel.size() == inp.size()' fails in getConvPoolPaddings)");
  const auto& pads = aints(n, "pads");
  if (one_d && mode == "NOTSET" && !symmetric_pads(pads))
    return Support::no("OpenCV 4.6 pads a 1-D pool by the begin pad on both ends (pads " + str(pads) +
                       " give the wrong output length)");
  if (mode == "NOTSET" && ai(n, "ceil_mode") == 1 && !symmetric_pads(pads))
    return Support::no("with ceil_mode=1 OpenCV 4.6 drops the last window when (out-1)*stride >= in + pad_end "
                       "(Caffe's rule; ONNX uses pad_begin), so asymmetric pads " + str(pads) +
                       " can give one window less");
  // The int8 PoolingInt8 (qlinear_avg_pool2d) counts padding whatever the attribute says, so count_include_pad=1
  // is right there with explicit pads and 0 is the ledger's opencv-qlinear-avg-pool-count-include-pad-ignored;
  // but of an odd auto_pad=SAME total it pads floor(total/2) each side and the extra cell is not counted.
  if (n.op == "qlinear_avg_pool2d" && !form_has(n, "qlinear=qdq") && ai(n, "count_include_pad") == 1 &&
      (mode == "SAME_UPPER" || mode == "SAME_LOWER"))
    for (int64_t t : same_total_pads(g, n, false))
      if (t % 2 != 0)
        return Support::no("OpenCV 4.6's int8 average pool leaves the extra cell of an odd auto_pad=" + mode +
                           " padding (" + std::to_string(t) + ") out of the count_include_pad=1 divisor (k=[2,2] "
                           "on [4,4]: 24 where ONNX gives 12 at the edges)");
  // A qlinear_avg_pool2d in the QDQ form (qlinear=qdq) is the float AveragePool between Dequantize and Quantize
  // layers, with the float pool's rule (campaign seed 13451: padded count_include_pad=1 windows divided by their
  // inner cells, up to 98 steps off).
  const bool float_pool =
      n.op.rfind("avg_pool", 0) == 0 || (n.op == "qlinear_avg_pool2d" && form_has(n, "qlinear=qdq"));
  if (float_pool && ai(n, "count_include_pad") == 1) {
    const bool padded = mode == "SAME_UPPER" || mode == "SAME_LOWER" ||
                        (mode == "NOTSET" && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }));
    if (padded)
      return Support::no("OpenCV 4.6's ONNX importer ignores count_include_pad=1 (it counts padding only for models "
                         "whose producer is 'pytorch'), so padded windows are divided by their inner cells");
  }
  return auto_pad_support(g, n, false);
}

Support global_pool(const ir::Graph& g, const ir::Node& n) {
  if (rank_of(g, n.inputs[0]) > 4)
    return Support::no("OpenCV 4.6 global pooling takes 3-D and 4-D inputs; rank 5 fails at import "
                       "('addedDims <= pads_begin.size()')");
  return Support::yes();
}

// Two non-constant inputs: OpenCV 4.6 broadcasts them only in a few layouts, refuses most at import and
// computes some wrongly, so only equal shapes are run.
Support same_shapes(const ir::Graph& g, const ir::Node& n) {
  for (const auto& v : n.inputs)
    if (shape_of(g, v) != shape_of(g, n.inputs[0]))
      return Support::no("OpenCV 4.6 cannot broadcast two computed inputs reliably (shapes " +
                         core::to_string(shape_of(g, n.inputs[0])) + " and " + core::to_string(shape_of(g, v)) +
                         "): refused at import for most shapes, wrong values for some");
  return Support::yes();
}

Support matmul(const ir::Graph& g, const ir::Node& n) {
  const core::Shape& a = shape_of(g, n.inputs[0]);
  const core::Shape& b = shape_of(g, n.inputs[1]);
  if (g.is_initializer(n.inputs[1]) && b.size() > 2)
    return Support::no("OpenCV 4.6's MatMul importer transposes a constant right operand with cv::transpose, which "
                       "takes 2-D matrices only (measured: " + core::to_string(b) +
                       " asserts '_src.dims() <= 2' in matrix_transform.cpp)");
  if (a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin()))
    return Support::no("OpenCV 4.6 MatMul of two computed inputs needs equal ranks and equal batch dimensions (" +
                       core::to_string(a) + " x " + core::to_string(b) + " fails in fully_connected_layer)");
  return Support::yes();
}

Support batch_norm(const ir::Graph& g, const ir::Node& n) {
  if (ai(n, "training") == 1 && shape_of(g, n.inputs[0])[1] == 1)
    return Support::no(
        "with one channel the exported batch-statistics decomposition multiplies [N,1,...] by an "
        "all-ones [1,1,...] statistic, which OpenCV 4.6 refuses ('axis != outShape.size()' in parseMul)");
  return Support::yes();
}

Support reduce_sum(const ir::Graph&, const ir::Node& n) {
  if (!aints(n, "axes").empty() && opset() >= 13)
    return Support::no("OpenCV 4.6 reads ReduceSum only with an axes attribute (opset <= 11); from opset 13 axes is "
                       "an input: 'Unsupported ReduceSum operation of opset 13'");
  return Support::yes();
}

// Measured: onnx_importer.cpp parseResize asserts interp_mode != "tf_crop_and_resize".
const char* const kNoCrop = "OpenCV 4.6 refuses coordinate_transformation_mode=tf_crop_and_resize at import";

Support resize_nearest(const ir::Graph&, const ir::Node& n) {
  const std::string& ctm = as(n, "coordinate_transformation_mode");
  const std::string& nm = as(n, "nearest_mode");
  if (ctm == "tf_crop_and_resize") return Support::no(kNoCrop);
  if (ctm == "tf_half_pixel_for_nn")
    return Support::no("OpenCV 4.6 refuses coordinate_transformation_mode=tf_half_pixel_for_nn at import");
  if ((ctm == "asymmetric" && nm == "floor") || (ctm == "align_corners" && nm == "round_prefer_ceil"))
    return Support::yes();
  return Support::no("OpenCV 4.6's nearest Resize implements only asymmetric+floor and align_corners+round-half-up; "
                     "it ignores nearest_mode and the half-pixel shift (wrong values for " + ctm + "+" + nm + ")");
}

Support resize_bilinear(const ir::Graph& g, const ir::Node& n) {
  if (as(n, "coordinate_transformation_mode") == "tf_crop_and_resize") return Support::no(kNoCrop);
  if (as(n, "coordinate_transformation_mode") != "pytorch_half_pixel") return Support::yes();
  const core::Shape& x = shape_of(g, n.inputs[0]);
  const auto& sizes = aints(n, "sizes");
  for (size_t i = 0; i < 2; ++i)
    if (sizes[i] == 1 && x[2 + i] > 1)
      return Support::no("OpenCV 4.6 handles pytorch_half_pixel like half_pixel, also for an output size of 1 "
                         "(ONNX then samples coordinate 0): wrong values");
  return Support::yes();
}

Support flatten(const ir::Graph& g, const ir::Node& n) {
  const int64_t r = rank_of(g, n.inputs[0]);
  const int64_t axis = ai(n, "axis") < 0 ? ai(n, "axis") + r : ai(n, "axis");
  if (axis >= r)
    return Support::no("OpenCV 4.6 Flatten needs axis < rank ('axis >= -dims && axis < dims'); ONNX allows axis = "
                       "rank (" + std::to_string(axis) + ")");
  return Support::yes();
}

Support unsqueeze(const ir::Graph&, const ir::Node& n) {
  const auto& axes = aints(n, "axes");
  if (axes.size() > 1)
    return Support::no("OpenCV 4.6 Unsqueeze inserts one axis only ('Multidimensional unsqueeze' is not implemented)");
  if (axes[0] < 0)
    return Support::no("OpenCV 4.6 Unsqueeze refuses a negative axis (" + std::to_string(axes[0]) +
                       ": '0 <= axis && axis <= inpShape.size()')");
  return Support::yes();
}

Support slice(const ir::Graph& g, const ir::Node& n) {
  const auto& axes = aints(n, "axes");
  const int64_t r = rank_of(g, n.inputs[0]);
  for (size_t i = 1; i < axes.size(); ++i) {
    // The importer checks the axes as written, the layer the axes counted from 0.
    const int64_t prev = axes[i - 1] < 0 ? axes[i - 1] + r : axes[i - 1];
    const int64_t cur = axes[i] < 0 ? axes[i] + r : axes[i];
    if (axes[i] != axes[i - 1] + 1 || cur != prev + 1)
      return Support::no("OpenCV 4.6 Slice needs consecutive increasing axes ('axes[i - 1] == axes[i] - 1'), got " +
                         str(axes));
  }
  const auto& steps = aints(n, "steps");
  if (std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s < 0; }))
    return Support::no("OpenCV 4.6 Slice takes positive steps only (measured: slice_layer.cpp asserts 'step >= 1', or "
                       "'end < 0 || end > start' first), steps " + str(steps));
  const bool stepped = std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s != 1; });
  const bool negative = std::any_of(axes.begin(), axes.end(), [](int64_t a) { return a < 0; });
  if (stepped && negative)
    return Support::no("OpenCV 4.6 Slice applies steps to the wrong axis when axes are negative (axes " + str(axes) +
                       ", steps " + str(steps) + ": wrong output shape)");
  return Support::yes();
}

Support pad(const ir::Graph& g, const ir::Node& n) {
  const std::string& mode = as(n, "mode");
  if (mode == "constant") return Support::yes();
  const int64_t r = rank_of(g, n.inputs[0]);
  std::vector<int64_t> pads = aints(n, "pads");
  pads.resize(static_cast<size_t>(2 * r), 0);
  for (int64_t a = 0; a < r - 2; ++a)
    if (pads[a] != 0 || pads[r + a] != 0)
      return Support::no("OpenCV 4.6 pads in " + mode + " mode only the last two axes of a 4-D blob");
  if (r != 4) return Support::no("OpenCV 4.6 pads in " + mode + " mode only 4-D blobs ('inputs[0].dims == 4')");
  // cv::copyMakeBorder's border modes read at most one axis length beyond the edge; ONNX's edge
  // mode repeats the edge value any number of times. One refusal, whichever side is too wide.
  const core::Shape& s = g.types.at(n.inputs[0]).shape;
  for (int64_t a = 2; a < 4; ++a)
    if (pads[a] > s[a] || pads[r + a] > s[a])
      return Support::no("OpenCV 4.6 pads in " + mode + " mode at most the axis length on each side ('padTop <= " +
                         "inputs[0].size[2]' and the like fail): pads " + str(aints(n, "pads")) + " for shape " +
                         core::to_string(s));
  return Support::yes();
}

const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> r = [] {
    std::map<std::string, Rule> m;
    for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum", "sum"}) m[op] = same_shapes;
    for (const char* op : {"conv1d", "conv2d", "conv3d"}) m[op] = conv;
    m["conv_transpose2d"] = conv_transpose;
    for (const char* op : {"avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"}) m[op] = pool;
    m["global_avg_pool"] = m["global_max_pool"] = global_pool;
    m["lrn"] = [](const ir::Graph&, const ir::Node& n) {
      if (ai(n, "size") % 2 == 0)
        return Support::no("OpenCV 4.6's LRN layer takes only odd sizes ('LRN layer supports only positive odd values "
                           "for local_size' at import), ONNX LRN size " +
                           std::to_string(ai(n, "size")));
      return Support::yes();
    };
    m["matmul"] = matmul;
    // The int8 layers of the importer's quantized path (quantizer naming: the backend's quantizer_names).
    m["qlinear_matmul"] = [](const ir::Graph&, const ir::Node&) { return Support::yes(); };
    // Per axis (scales along axis, ONNX opset 13), measured: QuantizeLinear is refused at import (handleQuantizedNode,
    // onnx_importer.cpp:770), and DequantizeLinear is imported with its first scale and zero
    // point for every index (wrong values, ledger notes; reproducers/dequantize_per_axis.py).
    m["quantize_linear"] = m["dequantize_linear"] = [](const ir::Graph&, const ir::Node& n) {
      if (!ops::per_channel_weight(n.attrs, "")) return Support::yes();
      return Support::no(n.op == "quantize_linear"
                             ? "OpenCV 4.6's importer refuses a per-axis QuantizeLinear ('Per-channel "
                               "scales/zeropoints are not supported' in handleQuantizedNode, onnx_importer.cpp:770)"
                             : "OpenCV 4.6's importer reads a per-axis DequantizeLinear with its first scale and zero "
                               "point for every index (wrong values; reproducers/dequantize_per_axis.py)");
    };
    m["qlinear_conv2d"] = conv;
    // The quantized twins (com.microsoft QLinear*) as their float layers' geometry.
    m["qlinear_add"] = m["qlinear_mul"] = same_shapes;
    m["qlinear_avg_pool2d"] = m["qlinear_max_pool2d"] = pool;
    m["qlinear_global_avg_pool"] = global_pool;
    for (const char* op : {"qlinear_concat", "qlinear_leaky_relu", "qlinear_sigmoid"})
      m[op] = [](const ir::Graph&, const ir::Node&) { return Support::yes(); };
    m["batch_norm"] = batch_norm;
    m["reduce_sum"] = reduce_sum;
    m["resize_nearest"] = resize_nearest;
    m["resize_bilinear"] = resize_bilinear;
    m["resize_bicubic"] = [](const ir::Graph&, const ir::Node&) {
      return Support::no("OpenCV 4.6's Resize layer has no cubic mode (measured: resize_layer.cpp asserts "
                         "'interpolation == \"nearest\" || interpolation == \"opencv_linear\" || interpolation == "
                         "\"bilinear\"')");
    };
    m["flatten"] = flatten;
    m["unsqueeze"] = unsqueeze;
    m["slice"] = slice;
    m["pad"] = pad;
    const std::string clip_why =
        "OpenCV 4.6 reads Clip only in its opset-6 form (min/max attributes); from opset 11 the bounds are inputs "
        "('node_proto.input_size() == 1' fails in parseClip)";
    m["hardswish"] = [clip_why](const ir::Graph&, const ir::Node& n) {
      if (opset() >= 14 && !form_has(n, "hardswish=decomposed")) return Support::yes();
      return Support::no("HardSwish is written as x*Clip(x+3, 0, 6)/6 (opset " + std::to_string(opset()) +
                         (opset() >= 14 ? ", the decomposed form): " : ", before HardSwish): ") + clip_why);
    };
    m["clip"] = m["relu6"] = [clip_why](const ir::Graph&, const ir::Node&) { return Support::no(clip_why); };
    m["layer_norm"] = [](const ir::Graph&, const ir::Node&) {
      return Support::no(
          "OpenCV 4.6 has no LayerNormalization (opset 17) and fails on the exporter's ReduceMean/Sub/Mul "
          "decomposition below 17 (broadcast Sub/Mul of computed inputs: refused at import or wrong values)");
    };
    m["squeeze"] = [](const ir::Graph&, const ir::Node& n) {
      if (opset() >= 13)
        return Support::no(
            "OpenCV 4.6 reads Squeeze only with an axes attribute (opset <= 11); from opset 13 axes is an input "
            "('node_proto.input_size() == 1' fails in parseSqueeze)");
      // Measured (campaign seed 2341, cv2 4.6): without axes the importer fails; a negative axis is
      // skipped, so the axis stays and the next layer fails on the shape or reads the wrong axes.
      const auto& axes = aints(n, "axes");
      if (axes.empty())
        return Support::no("OpenCV 4.6 reads Squeeze only with axes given (ONNX's default, every axis of length 1, "
                           "fails: 'layerParams.has(\"axes\")' in parseSqueeze)");
      for (int64_t a : axes)
        if (a < 0)
          return Support::no("OpenCV 4.6 Squeeze skips a negative axis (" + std::to_string(a) +
                             "): the axis stays, a wrong output shape");
      return Support::yes();
    };
    m["simple_rnn"] = [](const ir::Graph&, const ir::Node&) {
      return Support::no("OpenCV 4.6 has no layer for ONNX RNN (\"Can't create layer of type RNN\")");
    };
    // OpenCV 4.6 reads GRU only with six inputs ('node_proto.input_size() == 6' in parseGRU): its exchange
    // form always writes initial_h (variant.h avoids rnn_inputs=given for it), and a one-direction layer's Y
    // loses its direction axis by Reshape (variant.h avoids the Squeeze, whose axes are an input from opset 13);
    // its Y_h keeps the Squeeze, which imports up to opset 12 (by attribute).
    m["gru"] = [](const ir::Graph&, const ir::Node& n) {
      if (n.attrs.count("activation") && core::attr_s(n.attrs, "activation") != "tanh")
        return Support::no("OpenCV 4.6's GRU importer refuses the activations attribute (measured)");
      const bool bi = core::attr_s(n.attrs, "direction") == "bidirectional";
      if (core::attr_i(n.attrs, "return_sequences") == 0 && (bi || opset() >= 13))
        return Support::no(std::string("OpenCV 4.6's GRU gives Y only: ") +
                           (bi ? "the Transpose" : "the Reshape (Squeeze with an axes input from opset 13 does not "
                                                   "import either)") +
                           " of its Y_h fails ('shapeIt != outShapes.end()' in addLayer, measured)");
      return Support::yes();
    };
    m["lstm"] = [](const ir::Graph&, const ir::Node& n) {
      // LSTMLayerImpl takes Sigmoid and Tanh for each of f, g and h, and no other function (measured).
      if (n.attrs.count("activation") && core::attr_s(n.attrs, "activation") == "relu")
        return Support::no("OpenCV 4.6's LSTM takes Sigmoid and Tanh activations only, not Relu (measured)");
      if (core::attr_s(n.attrs, "direction") == "bidirectional" && core::attr_i(n.attrs, "peepholes") == 1)
        return Support::no("OpenCV 4.6 cannot import a bidirectional LSTM with peepholes: transformBlobs builds each "
                           "peephole matrix over both directions and LSTMLayerImpl asserts 'blobs[i].rows == N && "
                           "blobs[i].cols == N' (measured)");
      // A one-direction LSTM's Y loses its direction axis by Reshape in OpenCV's form (variant.h).
      return Support::yes();
    };
    for (const char* op : {"relu", "sigmoid", "tanh", "softplus", "softsign", "exp", "log", "sqrt", "reciprocal", "abs",
                           "neg", "elu", "selu", "pow", "rsqrt", "leaky_relu", "hard_sigmoid", "gelu",
                           "square", "concat", "dense", "softmax", "log_softmax", "reduce_max", "reduce_mean",
                           "reduce_min", "reduce_prod", "reshape", "transpose"})
      m[op] = yes;
    return m;
  }();
  return r;
}

}  // namespace

ModelForms::ModelForms(const ir::Graph& g, const Variant& v) : graph_(&g), variant_(&v), outer_(t_model_forms) {
  // The forms the exporter chooses for this model (a dry run: no bytes, no checker).
  try {
    forms_ = ir::onnx_forms(g, onnx_form(g, v));
  } catch (const std::exception&) {
    // The exporter refuses the model: the session says so (UnsupportedError); its nodes are judged plainly.
  }
  t_model_forms = this;
}

ModelForms::~ModelForms() { t_model_forms = outer_; }

Support node_support(const ir::Graph& g, const ir::Node& n, const Variant& v) {
  if (!t_model_forms || !t_model_forms->of(g, v)) {
    const ModelForms forms(g, v);
    return node_support(g, n, v);
  }
  const ops::OpSpec* spec = ops::catalogue().find(n.op);
  if (spec && spec->is_loss)
    return Support::no("loss operators are training-only; this backend runs forward passes of exported ONNX");
  const auto it = rules().find(n.op);
  if (it == rules().end()) return Support::no("no OpenCV 4.6 mapping is known for operator '" + n.op + "'");
  try {
    for (size_t i = 0; i < ir::data_input_count(n); ++i) {
      const core::TensorType& t = g.types.at(n.inputs[i]);
      if (t.dtype == core::DType::I64)
        return Support::no("OpenCV DNN blobs here are float32, input '" + n.inputs[i] + "' is int64");
      const bool graph_input = std::any_of(g.inputs.begin(), g.inputs.end(),
                                           [&](const ir::ValueInfo& in) { return in.name == n.inputs[i]; });
      if (graph_input && !core::is_float(t.dtype))
        return Support::no("OpenCV 4.6's Net::setInput converts a network input to float32: a quantized graph "
                           "input reaches its int8 layers as float (QLinearConv: 'input.type() == CV_8S' fails) or, "
                           "uint8, unshifted (DequantizeLinear off by 128 * scale); quantize a float input instead");
      if (t.shape.size() < 2 && !shape_agnostic_ops().count(n.op))
        return Support::no("OpenCV 4.6 blobs have at least 2 dimensions: a rank-" + std::to_string(t.shape.size()) +
                           " input is run as [n, 1], so this layer fails or reads the wrong axis");
    }
    // BatchNormalization, ConvTranspose and Gemm read their weights from the initializers ("Blob W
    // not found in const blobs"); Conv also takes a computed filter.
    const bool const_weights = n.op == "batch_norm" || n.op == "conv_transpose2d" || n.op == "dense";
    if (const_weights)
      if (Support w = constant_weights(g, n, "OpenCV 4.6's importer ('not found in const blobs')"); !w.ok) return w;
    if (Support f = form_support(n, v); !f.ok) return f;
    return it->second(g, n);
  } catch (const std::exception& e) {
    // The decision reads value shapes; a graph without them cannot be judged.
    return Support::no(std::string("cannot inspect the node's shapes: ") + e.what());
  }
}

}  // namespace quorum::backends::opencv
