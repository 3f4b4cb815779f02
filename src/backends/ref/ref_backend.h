// The float64 reference backend, also the base the faulty backend wraps.
#pragma once
#include "backends/backend.h"
#include "ref/interpreter.h"

namespace quorum::backends {

std::unique_ptr<Backend> make_ref_backend();
// A reference session whose kernels may be replaced (the faulty backend's numeric faults).
std::unique_ptr<Session> make_ref_session(const ir::Graph& g, ref::Overrides overrides = {});

}  // namespace quorum::backends
