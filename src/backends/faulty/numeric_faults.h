// Planted numeric faults: replacement kernels for the reference interpreter, each a classic
// library bug, so tests can check that a campaign finds it at the right stage.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ref/interpreter.h"

namespace quorum::backends::faulty {

struct NumericFault {
  std::string name;
  std::string what;   // the bug it imitates
  std::string stage;  // where the oracles should find it: FC, LC, BC
};

const std::vector<NumericFault>& numeric_faults();
// Kernel replacements for the named faults (each must be in numeric_faults()).
ref::Overrides numeric_overrides(const std::set<std::string>& names);

}  // namespace quorum::backends::faulty
