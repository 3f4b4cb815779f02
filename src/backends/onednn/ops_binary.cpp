// Two-input arithmetic with NumPy broadcasting (binary primitive), n-ary sum (sum primitive, or a
// chain of broadcasting adds when shapes differ) and concat (concat primitive); the forward runs
// through the lowering (lower.cpp) and the backend's sink (onednn_sink.cpp).
// Backward follows the chain rule with the same primitives, as the lowering's backward steps:
// products and quotients by binary ops, the reduction primitive to sum a gradient down to a
// broadcast operand's shape, and for maximum/minimum a comparison mask (binary ge/le) that sends
// ties to the first operand, as the reference does. Concat's backward splits the gradient with
// strided reorders (view steps).
#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {

void register_binary(OpTable& t) {
  for (const char* name : {"add", "sub", "mul", "div", "maximum", "minimum"})
    t[name] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["sum"] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["concat"] = OpEntry{maker<LoweredKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
