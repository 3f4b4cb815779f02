// Malformed ledgers found by fuzz/ledger_fuzz.cpp: each is one UserError naming the file, never a
// JSON library exception escaping, never an allocation for a shape the data does not hold.
#include <gtest/gtest.h>

#include "core/error.h"
#include "oracle/known.h"

namespace quorum::oracle {
namespace {

void expect_refused(const std::string& text) {
  try {
    parse_ledger(text, "k.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const core::UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("k.json: ", 0), 0u) << e.what();
  }
}

const std::string kHead = R"({"format": "quorum.known", "backend": "faulty", "entries": [)";
const std::string kEntry = R"({"id": "e", "class": "bug", "signature": "nan|FC|faulty|relu", "note": "n")";
const std::string kModel = R"("model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [2]}],
  "outputs": ["r"], "nodes": [{"name": "r", "op": "relu", "inputs": ["x"], "outputs": ["r"]}]})";

TEST(LedgerMalformed, FieldsOfTheWrongTypeAreOneUserError) {
  expect_refused(kHead + kEntry + R"(, "agreement": [{"op": "relu", "case": "three", "stage": "FC"}]}]})");
  expect_refused(kHead + kEntry + R"(, "agreement": [7]}]})");
  expect_refused(kHead + kEntry + R"(, "case": {"mode": 1, )" + kModel + "}}]}");
  expect_refused(kHead + kEntry + R"(, "also": [{"signature": 3}]}]})");
  expect_refused(kHead + R"(7]})");
}

TEST(LedgerMalformed, ATensorShapeItsDataDoesNotHoldIsRefusedBeforeAllocating) {
  // 2^62 elements with one value (was: an allocation of 32 EiB).
  expect_refused(kHead + kEntry + R"(, "case": {)" + kModel +
                 R"(, "inputs": {"x": {"shape": [2147483648, 2147483648], "data": [1]}}}}]})");
  expect_refused(kHead + kEntry + R"(, "case": {)" + kModel + R"(, "inputs": {"x": {"shape": [-2], "data": []}}}}]})");
  expect_refused(kHead + kEntry + R"(, "case": {)" + kModel + R"(, "inputs": {"x": {"shape": 2, "data": [1]}}}}]})");
}

TEST(LedgerMalformed, AWellFormedCaseStillLoads) {
  const Ledger l = parse_ledger(
      kHead + kEntry + R"(, "case": {)" + kModel + R"(, "inputs": {"x": {"shape": [2], "data": [1, "nan"]}}}}]})",
      "k.json");
  ASSERT_EQ(l.entries.size(), 1u);
  EXPECT_EQ(l.entries[0].inputs.at("x").numel(), 2);
}

}  // namespace
}  // namespace quorum::oracle
