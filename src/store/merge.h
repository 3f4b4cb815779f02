// Merging the findings stores of a campaign's shards (quorum merge): one store and bundles folder
// equal to the store a single run over the same models would have written (docs/findings.md).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace quorum::store {

struct MergeSummary {
  int64_t models = 0, findings = 0, hits = 0, root_causes = 0, bundles = 0;
};

// Merges the stores `sources` (campaign directories holding findings.db, or postgresql:// URLs)
// into the new campaign directory `out`: every model once (UserError when two sources hold the
// same model index: they are not shards of one campaign), hits summed per signature, first_model
// and first_seen the earliest (with that model's bundle, node and detail), last_seen the latest;
// each signature's bundle (with its reduced case and reproducer) copied to OUT/bundles. The
// sources must have the same settings, and `out` must not hold a store yet (UserError).
MergeSummary merge_campaigns(const std::vector<std::string>& sources, const std::string& out);

}  // namespace quorum::store
