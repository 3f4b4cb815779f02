// Operators of the 'softmax' family.
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace quorum::ops {

void register_softmax(Registry& r) { (void)r; }

}  // namespace quorum::ops
