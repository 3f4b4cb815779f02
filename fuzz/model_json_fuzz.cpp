// The JSON model format (ir/json_io.h, docs/model-format.md): a model file someone shares.
// Refusal: UserError. A model that parses must write back to JSON that parses to the same model.
#include <cstdlib>

#include "fuzz.h"
#include "ir/json_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  fuzz::expect_user_error([&] {
    const ir::Graph g = ir::graph_from_json(fuzz::text(data, size), "fuzz.json");
    const std::string once = ir::graph_to_json(g);
    const std::string twice = ir::graph_to_json(ir::graph_from_json(once, "fuzz.json (written back)"));
    if (once != twice) std::abort();  // the round trip is exact (json_io.h)
  });
  return 0;
}
