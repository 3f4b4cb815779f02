// quorum calibrate: measure every operator's agreement on the libraries and write the calibrated
// float32 tolerance table (src/ops/calibrated_tolerances.inc).
#include <fstream>
#include <iostream>
#include <sstream>

#include "campaign/calibrate.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fileio.h"

namespace quorum::cli {

int cmd_calibrate(const Options& o) {
  if (o.output.empty()) throw core::UserError("calibrate: give --output FILE (src/ops/calibrated_tolerances.inc)");
  const auto backends = campaign::parse_backends(o.backends.empty() ? "torch,onednn,opencv,armnn,xnnpack" : o.backends);
  const int cases = static_cast<int>(o.count);
  if (cases < 1) throw core::UserError("--count: at least 1 case per operator");
  const auto table = campaign::calibrate(backends, cases, limits_of(o));
  std::ostringstream os;
  write_calibration(os, table, o.command_line);
  core::write_file_atomic(o.output, os.str());
  int ran = 0;
  for (const auto& c : table) ran += c.atol > 0;
  std::cout << "calibrated " << ran << " of " << table.size() << " operators (" << cases << " cases each) into "
            << o.output << "; rebuild to use them\n";
  return 0;
}

}  // namespace quorum::cli
