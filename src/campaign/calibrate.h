// Calibrating the catalogue's float32 tolerances from measured agreement: every operator's sampled
// one-node cases on every library, the error each library shows against the float64 reference on
// the same float32 inputs, and a tolerance a safe factor above what the libraries achieve.
#pragma once
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "campaign/evaluate.h"

namespace quorum::campaign {

struct OpCalibration {
  std::string op;
  // Per backend: the largest error over the sampled cases, as atol (|got - want| / max(1, max|want|),
  // divided by sqrt of the case's reduction length) and as rtol (|got - want| / |want| where
  // |want| >= 1e-6 of the tensor's scale), and how many cases it ran.
  struct Measured {
    double atol = 0, rtol = 0;
    int cases = 0;
  };
  std::map<std::string, Measured> by_backend;
  double atol = 0, rtol = 0;  // the calibrated tolerance (0: no backend ran the operator)
};

// `cases` sampled cases per operator (the agreement test's sampler and seeds continued), on each backend.
std::vector<OpCalibration> calibrate(const std::vector<BackendSpec>& backends, int cases, const worker::Limits& limits);

// The C++ table src/ops/calibrated_tolerances.inc, with the command that regenerates it.
void write_calibration(std::ostream& os, const std::vector<OpCalibration>& table, const std::string& command_line);

}  // namespace quorum::campaign
