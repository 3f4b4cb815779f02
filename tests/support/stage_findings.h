// Test helper: an evaluation's findings of one stage.
#pragma once
#include <vector>

#include "campaign/evaluate.h"

namespace quorum::campaign {

inline std::vector<oracle::Finding> of_stage(const Evaluation& ev, core::Stage stage) {
  std::vector<oracle::Finding> out;
  for (const auto& f : ev.findings)
    if (f.stage == stage) out.push_back(f);
  return out;
}

}  // namespace quorum::campaign
