// quorum conformance [--backends LIST] [--output FILE.md]: the ONNX conformance suite on the
// reference and on backends; an operator x backend table.
#include <iostream>

#include "conformance/conformance.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/fileio.h"

namespace quorum::cli {

int cmd_conformance(const Options& o) {
  if (!o.positional.empty()) throw core::UserError("conformance: unexpected argument '" + o.positional[0] + "'");
  conformance::ConformanceOptions opt;
  opt.suite = o.suite;
  opt.filter = o.filter;
  if (!o.backends.empty()) opt.backends = worker::parse_backends(o.backends);
  opt.limits = limits_of(o);
  const conformance::ConformanceReport r = run_conformance(opt, [](size_t done, size_t total) {
    if (done % 50 == 0 || done == total)
      std::cerr << "\rconformance: " << done << "/" << total << " tests" << std::flush;
  });
  std::cerr << "\n";
  std::cout << conformance::conformance_text(r);
  if (!o.output.empty()) {
    core::write_file_atomic(o.output, conformance::conformance_markdown(r, o.command_line));
    std::cout << "wrote " << o.output << "\n";
  }
  const auto bad = conformance::unexplained_reference_failures(r);
  for (const auto& b : bad) std::cout << "reference fails with no listed reason: " << b << "\n";
  return bad.empty() ? 0 : 1;
}

}  // namespace quorum::cli
