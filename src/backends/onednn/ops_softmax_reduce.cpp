// softmax / log_softmax (softmax_v2 primitive, accurate and log algorithms, any axis) and the
// reductions sum / mean / max / min / prod (reduction primitive with the reduced dims kept as 1).
// Softmax's and the reductions' backward are the lowering's steps (reduce_sum/mean: broadcast by
// binary add onto zeros, scaling by eltwise linear; max/min: the first extreme element in row-major
// order, as the reference; prod: the product of the other elements, exact at zeros, as the reference).
#include "backends/onednn/onednn_sink.h"
#include "ops/kernel_util.h"

namespace quorum::backends::onednn {
namespace {

class SoftmaxKernel : public LoweredKernel {
 public:
  SoftmaxKernel(const ir::Graph& g, const ir::Node& n) : LoweredKernel(g, n) {
    softmax_fwd_pd(lw::softmax_geo(n.op, in_shape(0), attrs()), prop_kind::forward_inference);
  }

};

}  // namespace

void register_softmax_reduce(OpTable& t) {
  t["softmax"] = OpEntry{maker<SoftmaxKernel>(), {}, {}};
  t["log_softmax"] = OpEntry{maker<SoftmaxKernel>(), {}, {}};
  for (const char* name : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    t[name] = OpEntry{maker<LoweredKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn

namespace quorum::backends::onednn {

// d prod / d x_i, the product of the other elements of x_i's slice: prefix times suffix products
// (in double, rounded once). oneDNN has no reduction backward, so this glue is Quorum's; it used to
// divide the slice's product by x_i and mask zeros, which gives inf * 0 = NaN when the product
// overflows.
void ExecSink::prod_of_others(const Dims& xd, const std::string& x, const Dims& keep, const std::string& y) {
  const Buf& xb = get(x);
  const std::vector<int64_t> slot = ops::broadcast_map(Shape(keep.begin(), keep.end()), Shape(xd.begin(), xd.end()));
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(core::numel(Shape(keep.begin(), keep.end()))));
  for (size_t i = 0; i < slot.size(); ++i) members[static_cast<size_t>(slot[i])].push_back(static_cast<int64_t>(i));
  std::vector<double> others(slot.size(), 1.0);
  for (const auto& m : members) {
    double p = 1.0;
    for (int64_t i : m) {
      others[static_cast<size_t>(i)] = p;
      p *= xb.data[static_cast<size_t>(i)];
    }
    p = 1.0;
    for (auto it = m.rbegin(); it != m.rend(); ++it) {
      others[static_cast<size_t>(*it)] *= p;
      p *= xb.data[static_cast<size_t>(*it)];
    }
  }
  Buf out(Shape(xd.begin(), xd.end()));
  for (size_t i = 0; i < others.size(); ++i) out.data[i] = static_cast<float>(others[i]);
  put(y, std::move(out));
}

}  // namespace quorum::backends::onednn
