// Unary elementwise operators as chains of oneDNN eltwise algorithms, and softsign. The chains, their
// forward and backward steps (the library's eltwise backward kernels in reverse order on the step
// inputs the forward kept; softsign's from its kept denominator) are the lowering's (lower.cpp).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {

void register_eltwise(OpTable& t) {
  for (const std::string& name : lw::eltwise_ops()) t[name] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["softsign"] = OpEntry{maker<LoweredKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
