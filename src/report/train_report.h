// The train-diff page: loss and per-layer weight drift over the steps, per library, as Quorum's own
// SVG line plots (one self-contained HTML file beside curves.json; docs/trained.md).
#pragma once
#include <string>

#include "train/diff.h"

namespace quorum::report {

std::string train_diff_html(const train::DiffResult& r, const train::DiffOptions& o);

}  // namespace quorum::report
