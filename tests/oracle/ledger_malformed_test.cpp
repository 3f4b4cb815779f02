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

// A crash naming no node (a library dying while it builds the model) has the signature of every such crash: a
// campaign labels it by its reduced case, which names the operator, even where the bare signature matched an
// entry (opencv-celu-fusion-import-crash and opencv-gru-y-h-segfault share crash|compile|opencv||crash: SIGSEGV).
// A finding that names its node keeps the entry its signature matched.
TEST(LedgerMatch, ACrashNamingNoNodeBelongsToItsReducedCasesEntry) {
  Ledger l;
  auto entry = [](const std::string& id, const std::string& sig, const std::string& also) {
    KnownEntry e;
    e.id = id;
    e.signature = sig;
    if (!also.empty()) e.also = {KnownPattern{also, {}, false}};
    return e;
  };
  l.entries = {entry("celu", "crash|compile|opencv||crash: SIGSEGV", "crash|compile|opencv|mul|crash: SIGSEGV"),
               entry("gru", "crash|compile|opencv||crash: SIGSEGV", "crash|compile|opencv|gru|crash: SIGSEGV"),
               entry("relu", "inconsistency|FC|opencv|relu", ""),
               entry("pool", "crash|FC|opencv|max_pool2d|bad shape", "")};
  const std::string nodeless = "crash|compile|opencv:opset=11||crash: SIGSEGV";
  ASSERT_NE(l.match(nodeless), nullptr);
  EXPECT_EQ(l.match(nodeless)->id, "celu");  // the bare signature: the first entry
  const KnownEntry* e = l.match_reduced(nodeless, "celu", "crash|compile|opencv|gru|crash: SIGSEGV");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "gru");
  // Its own entry's reduced case, or one no entry knows: the label stays.
  EXPECT_EQ(l.match_reduced(nodeless, "celu", "crash|compile|opencv|mul|crash: SIGSEGV"), nullptr);
  EXPECT_EQ(l.match_reduced(nodeless, "celu", "crash|compile|opencv|conv2d|crash: SIGSEGV"), nullptr);
  // A finding naming its node keeps what its signature matched; one the ledger did not know takes its reduced
  // case's entry (a node failing on the shape an upstream node gave it).
  EXPECT_EQ(l.match_reduced("inconsistency|FC|opencv|relu|{}", "relu", "crash|FC|opencv|max_pool2d|bad shape"),
            nullptr);
  e = l.match_reduced("crash|FC|opencv|reshape|bad shape", "", "crash|FC|opencv|max_pool2d|bad shape");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, "pool");
}

}  // namespace
}  // namespace quorum::oracle
