// Replaying a bundle: its model rerun on the same backends with the same settings (quorum replay).
// Above bundles and detection: a detection finding is judged again by its pair's distance.
#pragma once
#include <string>
#include <vector>

#include "campaign/evaluate.h"

namespace quorum::campaign {

struct Replayed {
  bool reproduced = false;
  std::string expected;               // the signature in the bundle
  std::vector<oracle::Finding> found;  // what the rerun found
};
// Reruns a bundle's model on the same backends with the same settings.
Replayed replay(const std::string& bundle_dir);

}  // namespace quorum::campaign
