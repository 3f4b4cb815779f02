// The float64 reference backend, also the base the faulty backend wraps.
#pragma once
#include "backends/backend.h"

namespace quorum::backends {

std::unique_ptr<Backend> make_ref_backend();

}  // namespace quorum::backends
