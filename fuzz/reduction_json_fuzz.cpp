// A bundle's reduced/reduction.json (report/issue.h), as `quorum report` reads a bundle shared by
// others. Reading never refuses: anything malformed is left out, so no exception may escape.
#include "fuzz.h"
#include "report/issue.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  quorum::report::parse_reduction(quorum::fuzz::text(data, size));
  return 0;
}
