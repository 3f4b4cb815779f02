// A known-issue ledger (oracle/known.h, src/backends/<name>/known_differences.json), as `quorum
// known --ledger` reads one someone shares. Refusal: UserError. Every entry that loads is matched
// against its own signature.
#include "fuzz.h"
#include "oracle/known.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  fuzz::expect_user_error([&] {
    const oracle::Ledger l = oracle::parse_ledger(fuzz::text(data, size), "known_differences.json");
    for (const auto& e : l.entries) l.match(e.signature);
  });
  return 0;
}
