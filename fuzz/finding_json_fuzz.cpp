// A bundle's finding.json (campaign/bundle.h, report/repro.h), as `quorum replay`, `repro`,
// `reduce` and `report` read a bundle shared by others. Refusal: UserError.
#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "fuzz.h"
#include "report/repro.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  fuzz::expect_user_error([&] {
    const auto j = campaign::parse_finding(fuzz::text(data, size), "finding.json");
    backends::ReproCase c;
    report::read_finding_fields(j, j, "finding.json", c);
    campaign::finding_setup(j, "finding.json");
  });
  return 0;
}
