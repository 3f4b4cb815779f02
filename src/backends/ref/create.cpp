// The 'ref' worker's backend.
#include "backends/ref/ref_backend.h"
#include "core/error.h"

namespace quorum::backends {

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  if (!args.empty()) throw core::UserError("backend 'ref' takes no options, got '" + args[0] + "'");
  return make_ref_backend();
}

}  // namespace quorum::backends
