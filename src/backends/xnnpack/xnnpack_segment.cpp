// The backend's sink (LibrarySink, xnnpack_common.h): the lowering's calls made on XNNPACK. One
// subgraph per segment, turned into a runtime (single-threaded: no pthreadpool) when the segment
// ends; every node output is an external output, so the host sees every intermediate (in the
// optimized run only the values the host needs are, lower.h); values that cross segments go back
// through the host, permuted there when the next segment wants them in another layout. concat runs
// as its own step on the operator API.
#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/xnnpack/xnnpack_common.h"

namespace quorum::backends::xnnpack {

const char* status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "xnn_status_success";
    case xnn_status_uninitialized:
      return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter:
      return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state:
      return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter:
      return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware:
      return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory:
      return "xnn_status_out_of_memory";
  }
  return "xnn_status#unknown";
}

void check_define(xnn_status s, const std::string& call) {
  if (s != xnn_status_success) throw ConversionError(call + " failed: " + status_name(s));
}

void check_run(xnn_status s, const std::string& call) {
  if (s != xnn_status_success) throw std::runtime_error("XNNPACK " + call + " failed: " + status_name(s));
}

core::Tensor from_channels_last(const std::vector<float>& data, const Shape& logical) {
  const int64_t n = logical[0], c = logical[1];
  int64_t sp = 1;  // the spatial cells
  for (size_t i = 2; i < logical.size(); ++i) sp *= logical[i];
  core::Tensor t(core::DType::F32, logical);
  float* out = t.f32();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t k = 0; k < sp; ++k) out[(i * c + j) * sp + k] = data[static_cast<size_t>((i * sp + k) * c + j)];
  return t;
}

namespace {

struct IoValue {
  std::string name;
  Layout layout;
  uint32_t id;
  Shape shape;
  core::DType dtype;  // the host's: F32, or I8/U8 for a quantized value
};

// Row-major [N, C, S] to [N, S, C] (to_last) or back, on elements of `size` bytes (S: the spatial cells).
void permute(const uint8_t* in, uint8_t* out, const Shape& logical, size_t size, bool to_last) {
  const size_t n = static_cast<size_t>(logical[0]), c = static_cast<size_t>(logical[1]);
  const size_t sp = static_cast<size_t>(core::numel(logical)) / std::max<size_t>(1, n * c);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < c; ++j)
      for (size_t k = 0; k < sp; ++k) {
        const size_t plain = (i * c + j) * sp + k, last = (i * sp + k) * c + j;
        std::memcpy(out + (to_last ? last : plain) * size, in + (to_last ? plain : last) * size, size);
      }
}

// A runtime built from one subgraph; external values are bound and permuted at every run.
class SegmentStep : public Step {
 public:
  SegmentStep(xnn_runtime_t rt, std::vector<IoValue> inputs, std::vector<IoValue> outputs)
      : rt_(rt), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  ~SegmentStep() override { xnn_delete_runtime(rt_); }

  void run(ValueMap& values) override {
    std::vector<xnn_external_value> bind;
    std::vector<core::Tensor> staged;  // channels-last copies of inputs, and every output
    staged.reserve(inputs_.size() + outputs_.size());
    for (const auto& in : inputs_) {
      core::Tensor& t = values.at(in.name);
      if (t.dtype() != in.dtype)
        throw std::logic_error("value '" + in.name + "' is " + core::to_string(t.dtype()) + ", the segment reads " +
                               core::to_string(in.dtype));
      if (in.layout == Layout::Plain) {
        bind.push_back({in.id, t.raw()});
      } else {
        staged.emplace_back(in.dtype, in.shape);
        permute(static_cast<const uint8_t*>(t.raw()), static_cast<uint8_t*>(staged.back().raw()), in.shape,
                core::dtype_size(in.dtype), true);
        bind.push_back({in.id, staged.back().raw()});
      }
    }
    const size_t first_out = staged.size();
    for (const auto& out : outputs_) {
      staged.emplace_back(out.dtype, out.shape);
      bind.push_back({out.id, staged.back().raw()});
    }
    check_run(xnn_setup_runtime(rt_, bind.size(), bind.data()), "xnn_setup_runtime");
    check_run(xnn_invoke_runtime(rt_), "xnn_invoke_runtime");
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const IoValue& out = outputs_[i];
      core::Tensor& data = staged[first_out + i];
      if (out.layout == Layout::Plain) {
        values.insert_or_assign(out.name, std::move(data));
      } else {
        core::Tensor t(out.dtype, out.shape);
        permute(static_cast<const uint8_t*>(data.raw()), static_cast<uint8_t*>(t.raw()), out.shape,
                core::dtype_size(out.dtype), false);
        values.insert_or_assign(out.name, std::move(t));
      }
    }
  }

 private:
  xnn_runtime_t rt_;
  std::vector<IoValue> inputs_, outputs_;
};

// concat: one strided copy per input into the output's rows.
class ConcatStep : public Step {
 public:
  ConcatStep(const ir::Node& n, Concat c) : c_(std::move(c)) {
    for (const auto& k : c_.copies) {
      xnn_operator_t op = nullptr;
      check_define(xnn_create_copy_nc_x32(k.channels, k.channels, c_.stride, 0, &op),
                   "node '" + n.name + "' (concat): xnn_create_copy_nc_x32");
      ops_.push_back(op);
    }
  }
  ~ConcatStep() override {
    for (xnn_operator_t op : ops_) xnn_delete_operator(op);
  }

  void run(ValueMap& values) override {
    core::Tensor y(core::DType::F32, c_.shape);
    for (size_t i = 0; i < ops_.size(); ++i) {
      const ConcatCopy& k = c_.copies[i];
      const float* x = k.data ? k.data->data() : values.at(k.value).f32();
      check_run(xnn_setup_copy_nc_x32(ops_[i], c_.batch, x, y.f32() + k.offset, nullptr), "xnn_setup_copy_nc_x32");
      check_run(xnn_run_operator(ops_[i], nullptr), "xnn_run_operator (copy_nc_x32)");
    }
    values.insert_or_assign(c_.output, std::move(y));
  }

 private:
  Concat c_;  // initializer inputs keep their float32 values here
  std::vector<xnn_operator_t> ops_;
};

}  // namespace

LibrarySink::LibrarySink(const ir::Graph& g, ConstantStore& constants, LoweringLog& log)
    : g_(g), constants_(constants), log_(log), reserved_(static_cast<uint32_t>(2 * g.types.size() + 1)) {}

LibrarySink::~LibrarySink() {
  if (sg_) xnn_delete_subgraph(sg_);
}

void LibrarySink::begin_subgraph() {
  check_define(xnn_create_subgraph(reserved_, 0, &sg_), "xnn_create_subgraph");
  ids_.clear();
}

void LibrarySink::begin_node(const ir::Node& node, Layout) {
  where_ = "node '" + node.name + "' (" + node.op + ")";
  node_ = node.name;
}

void LibrarySink::bind(ValueId v, uint32_t xnn_id) {
  if (ids_.size() <= v) ids_.resize(v + 1, XNN_INVALID_VALUE_ID);
  ids_[v] = xnn_id;
}

namespace {

xnn_datatype xnn_type(QType t) {
  static const xnn_datatype types[] = {xnn_datatype_fp32, xnn_datatype_qint8, xnn_datatype_quint8,
                                       xnn_datatype_qint32};
  return types[static_cast<size_t>(t)];
}

}  // namespace

uint32_t LibrarySink::define_tensor(const Dims& dims, const void* data, uint32_t external, uint32_t flags,
                                    const std::string& what, const Quant& q) {
  uint32_t id = XNN_INVALID_VALUE_ID;
  if (!q.quantized()) {
    check_define(xnn_define_tensor_value(sg_, xnn_datatype_fp32, dims.size(), dims.data(), data, external, flags, &id),
                 where_ + ": xnn_define_tensor_value (" + what + ")");
  } else {
    check_define(xnn_define_quantized_tensor_value(sg_, xnn_type(q.type), q.zero_point, q.scale, dims.size(),
                                                   dims.data(), data, external, flags, &id),
                 where_ + ": xnn_define_quantized_tensor_value (" + what + ")");
  }
  return id;
}

void LibrarySink::external_input(ValueId v, const std::string& value, Layout, const Dims& dims, uint32_t external,
                                 const Quant& q) {
  bind(v, define_tensor(dims, nullptr, external, XNN_VALUE_FLAG_EXTERNAL_INPUT, "external input '" + value + "'", q));
}

void LibrarySink::external_output(ValueId v, const std::string& value, Layout, const Dims& dims, uint32_t external,
                                  const Quant& q) {
  bind(v,
       define_tensor(dims, nullptr, external, XNN_VALUE_FLAG_EXTERNAL_OUTPUT, "external output '" + value + "'", q));
}

void LibrarySink::weight_value(ValueId v, const std::string&, Layout, const Dims& dims, std::vector<float> data) {
  constants_.push_back(std::move(data));
  bind(v, define_tensor(dims, constants_.back().data(), XNN_INVALID_VALUE_ID, 0, "static"));
}

void LibrarySink::static_value(ValueId v, const Dims& dims, std::vector<float> data, const std::string&) {
  constants_.push_back(std::move(data));
  bind(v, define_tensor(dims, constants_.back().data(), XNN_INVALID_VALUE_ID, 0, "static"));
}

void LibrarySink::internal_value(ValueId v, const Dims& dims, const Quant& q) {
  bind(v, define_tensor(dims, nullptr, XNN_INVALID_VALUE_ID, 0, "internal", q));
}

void LibrarySink::quantized_static(ValueId v, const Dims& dims, std::vector<int32_t> data, const Quant& q,
                                   const std::string& what) {
  const size_t size = core::dtype_size(host_dtype(q.type));
  std::vector<float> store((data.size() * size + sizeof(float) - 1) / sizeof(float) + 1);
  auto* bytes = reinterpret_cast<uint8_t*>(store.data());
  for (size_t i = 0; i < data.size(); ++i) {
    if (q.type == QType::QInt8) {
      const auto e = static_cast<int8_t>(data[i]);
      std::memcpy(bytes + i, &e, 1);
    } else if (q.type == QType::QUInt8) {
      bytes[i] = static_cast<uint8_t>(data[i]);
    } else {
      std::memcpy(bytes + i * size, &data[i], size);
    }
  }
  constants_.push_back(std::move(store));
  bind(v, define_tensor(dims, constants_.back().data(), XNN_INVALID_VALUE_ID, 0, "static " + what, q));
}

void LibrarySink::check(xnn_status s, const char* call) {
  log_.note(node_, call);
  check_define(s, where_ + ": " + call);
}

// The definition functions, indexed by the lowering's enumerators (lower.h), in their order.
void LibrarySink::unary(Unary op, ValueId x, ValueId y) {
  static const decltype(&xnn_define_abs) fns[] = {xnn_define_abs,       xnn_define_negate, xnn_define_sigmoid,
                                                  xnn_define_hardswish, xnn_define_square, xnn_define_square_root};
  check(fns[static_cast<size_t>(op)](sg_, xid(x), xid(y), 0), call_name(op));
}

void LibrarySink::arithmetic(Arithmetic op, float min, float max, ValueId a, ValueId b, ValueId y) {
  static const decltype(&xnn_define_add2) fns[] = {xnn_define_add2, xnn_define_subtract, xnn_define_multiply2,
                                                   xnn_define_divide};
  check(fns[static_cast<size_t>(op)](sg_, min, max, xid(a), xid(b), xid(y), 0), call_name(op));
}

void LibrarySink::binary(Binary op, ValueId a, ValueId b, ValueId y) {
  static const decltype(&xnn_define_maximum2) fns[] = {xnn_define_maximum2, xnn_define_minimum2,
                                                       xnn_define_squared_difference};
  check(fns[static_cast<size_t>(op)](sg_, xid(a), xid(b), xid(y), 0), call_name(op));
}

void LibrarySink::clamp(float min, float max, ValueId x, ValueId y) {
  check(xnn_define_clamp(sg_, min, max, xid(x), xid(y), 0), "xnn_define_clamp");
}

void LibrarySink::elu(float alpha, ValueId x, ValueId y) {
  check(xnn_define_elu(sg_, alpha, xid(x), xid(y), 0), "xnn_define_elu");
}

void LibrarySink::leaky_relu(float slope, ValueId x, ValueId y) {
  check(xnn_define_leaky_relu(sg_, slope, xid(x), xid(y), 0), "xnn_define_leaky_relu");
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// XNN_FLAG_* of the lowering's flag bits.
uint32_t xnn_flags(uint32_t flags) {
  uint32_t f = 0;
  if (flags & kTensorflowSamePadding) f |= XNN_FLAG_TENSORFLOW_SAME_PADDING;
  if (flags & kTransposeWeights) f |= XNN_FLAG_TRANSPOSE_WEIGHTS;
  if (flags & kAlignCorners) f |= XNN_FLAG_ALIGN_CORNERS;
  if (flags & kTensorflowLegacyMode) f |= XNN_FLAG_TENSORFLOW_LEGACY_MODE;
  return f;
}

}  // namespace

void LibrarySink::convolution_2d(const Window2d& w, uint32_t groups, size_t group_input_channels,
                                 size_t group_output_channels, ValueId x, ValueId filter, ValueId bias, ValueId y) {
  check(xnn_define_convolution_2d(sg_, w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, groups,
                                  group_input_channels, group_output_channels, -kInf, kInf, xid(x), xid(filter),
                                  xid(bias), xid(y), xnn_flags(w.flags)),
        "xnn_define_convolution_2d");
}

void LibrarySink::depthwise_convolution_2d(const Window2d& w, uint32_t depth_multiplier, size_t input_channels,
                                           ValueId x, ValueId filter, ValueId bias, ValueId y) {
  check(xnn_define_depthwise_convolution_2d(sg_, w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw,
                                            depth_multiplier, input_channels, -kInf, kInf, xid(x), xid(filter),
                                            xid(bias), xid(y), xnn_flags(w.flags)),
        "xnn_define_depthwise_convolution_2d");
}

void LibrarySink::deconvolution_2d(const Window2d& w, uint32_t adjustment_h, uint32_t adjustment_w, uint32_t groups,
                                   size_t group_input_channels, size_t group_output_channels, ValueId x, ValueId filter,
                                   ValueId bias, ValueId y) {
  check(xnn_define_deconvolution_2d(sg_, w.top, w.right, w.bottom, w.left, adjustment_h, adjustment_w, w.kh, w.kw, w.sh,
                                    w.sw, w.dh, w.dw, groups, group_input_channels, group_output_channels, -kInf, kInf,
                                    xid(x), xid(filter), xid(bias), xid(y), xnn_flags(w.flags)),
        "xnn_define_deconvolution_2d");
}

void LibrarySink::max_pooling_2d(const Window2d& w, ValueId x, ValueId y) {
  check(xnn_define_max_pooling_2d(sg_, w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, -kInf,
                                  kInf, xid(x), xid(y), xnn_flags(w.flags)),
        "xnn_define_max_pooling_2d");
  // XNNPACK 2022-02 reads the wrong cell for padded cells of a dilated window (known_differences.json,
  // xnnpack-maxpool-dilation-padding-rows): noted so the ledger matches such nodes of any pooling.
  const bool padded = w.top + w.right + w.bottom + w.left > 0 || w.flags != 0;
  if ((w.dh > 1 || w.dw > 1) && padded) log_.note(node_, "xnn_define_max_pooling_2d (dilation with padding)");
}

void LibrarySink::average_pooling_2d(const Window2d& w, ValueId x, ValueId y) {
  check(xnn_define_average_pooling_2d(sg_, w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, -kInf, kInf,
                                      xid(x), xid(y), xnn_flags(w.flags)),
        "xnn_define_average_pooling_2d");
}

void LibrarySink::global_average_pooling_2d(ValueId x, ValueId y) {
  check(xnn_define_global_average_pooling_2d(sg_, -kInf, kInf, xid(x), xid(y), 0),
        "xnn_define_global_average_pooling_2d");
}

void LibrarySink::fully_connected(ValueId x, ValueId filter, ValueId bias, ValueId y, uint32_t flags) {
  check(xnn_define_fully_connected(sg_, -kInf, kInf, xid(x), xid(filter), xid(bias), xid(y), xnn_flags(flags)),
        "xnn_define_fully_connected");
}

void LibrarySink::static_reshape(const Dims& new_shape, ValueId x, ValueId y) {
  check(xnn_define_static_reshape(sg_, new_shape.size(), new_shape.data(), xid(x), xid(y), 0),
        "xnn_define_static_reshape");
}

void LibrarySink::static_constant_pad(const Dims& pre, const Dims& post, float value, ValueId x, ValueId y) {
  check(xnn_define_static_constant_pad(sg_, pre.data(), post.data(), value, xid(x), xid(y), 0),
        "xnn_define_static_constant_pad");
}

void LibrarySink::softmax(ValueId x, ValueId y) {
  check(xnn_define_softmax(sg_, xid(x), xid(y), 0), "xnn_define_softmax");
}

void LibrarySink::static_resize_bilinear_2d(size_t height, size_t width, ValueId x, ValueId y, uint32_t flags) {
  check(xnn_define_static_resize_bilinear_2d(sg_, height, width, xid(x), xid(y), xnn_flags(flags)),
        "xnn_define_static_resize_bilinear_2d");
}

void LibrarySink::convert(ValueId x, ValueId y) {
  check(xnn_define_convert(sg_, xid(x), xid(y), 0), "xnn_define_convert");
}

void LibrarySink::end_subgraph(const std::vector<External>& inputs, const std::vector<External>& outputs) {
  xnn_subgraph_t sg = sg_;
  sg_ = nullptr;
  std::vector<IoValue> ins, outs;
  for (const auto& e : inputs) ins.push_back({e.value, e.layout, xid(e.id), e.shape, host_dtype(e.quant.type)});
  for (const auto& e : outputs) outs.push_back({e.value, e.layout, xid(e.id), e.shape, host_dtype(e.quant.type)});
  std::string nodes;
  for (const auto& e : outputs) nodes += (nodes.empty() ? "" : ", ") + e.value;
  xnn_runtime_t rt = nullptr;
  const xnn_status s = outs.empty() ? xnn_status_success : xnn_create_runtime_v2(sg, nullptr, 0, &rt);
  xnn_delete_subgraph(sg);
  check_define(s, "xnn_create_runtime_v2 (segment producing " + nodes + ")");
  if (rt) steps_.push_back(std::make_unique<SegmentStep>(rt, std::move(ins), std::move(outs)));
}

void LibrarySink::concat(const ir::Node& node, const Concat& c) {
  log_.note(node.name, "host code");
  steps_.push_back(std::make_unique<ConcatStep>(node, c));
}

}  // namespace quorum::backends::xnnpack
