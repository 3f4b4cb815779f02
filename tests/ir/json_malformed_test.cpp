// Malformed model files found by fuzz/model_json_fuzz.cpp: each is one UserError naming the file.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/json_io.h"

namespace quorum::ir {
namespace {

TEST(JsonMalformed, ANumberBeyondDoubleIsOneUserError) {
  // nlohmann's parser throws out_of_range (not parse_error) for it: it escaped as an internal error.
  try {
    graph_from_json(R"({"format": "quorum.model", "version": 1, "inputs": [], "x": 0.1e5005406})", "m.json");
    FAIL() << "accepted";
  } catch (const core::UserError& e) {
    EXPECT_EQ(std::string(e.what()), "m.json: malformed JSON: number overflow parsing '0.1e5005406'");
  }
}

}  // namespace
}  // namespace quorum::ir
