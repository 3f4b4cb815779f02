// A backend run that reproduces a reference training result exactly (oracle tests then perturb it).
#pragma once
#include <string>

#include "oracle/oracle.h"
#include "ref/interpreter.h"

namespace quorum::oracle::testing {

inline BackendRun exact_run(const ir::Graph& g, const ref::TrainResult& tr, const std::string& name,
                            bool is_ref = false) {
  BackendRun r;
  r.backend = name;
  r.is_reference = is_ref;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) r.values[o] = tr.values.at(o);
  r.trained = true;
  r.loss = tr.loss;
  r.loss_grad = tr.loss_grad;
  r.grads = tr.grads;
  return r;
}

}  // namespace quorum::oracle::testing
