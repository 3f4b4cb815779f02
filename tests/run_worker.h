// Running one-node models through a worker from a test: a sampled one-operator model, and
// compile + forward on a worker with every node output kept.
#pragma once
#include <string>

#include "ir/build.h"
#include "ops/registry.h"
#include "worker/supervisor.h"

namespace quorum::testing {

// A float32 one-node model of `op` with a case drawn from its domain.
inline ir::SingleNode unit(const std::string& op, uint64_t seed = 1) {
  core::Rng rng(seed);
  return ir::single_node_graph(ops::op(op), ops::op(op).sample(rng), rng, core::DType::F32);
}

// Compiles and runs `sn` on `w`, returning the first outcome that is not ok (or the forward's).
inline worker::Outcome run(worker::Worker& w, const ir::SingleNode& sn, backends::ValueMap* out = nullptr) {
  worker::Outcome o = w.compile(sn.graph, {});
  if (!o.ok()) return o;
  backends::ValueMap values;
  o = w.forward(sn.inputs, true, values);
  if (out) *out = values;
  return o;
}

}  // namespace quorum::testing
