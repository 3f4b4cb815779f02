// Known-bug transfer: a ledger case moved to other libraries and to its operator's siblings turns a
// planted sibling fault into a new finding that records the entry it came from.
#include "campaign/transfer.h"
// (the campaign option)
#include "campaign/bundle.h"
#include "campaign/campaign.h"
#include "store/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ir/json_io.h"
#include "oracle/known.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;

// A ledger whose one entry is leaky_relu with alpha 0.7 on the planted leaky-relu-big-alpha-halved
// fault (leaky_relu halves an alpha above 0.5).
oracle::Ledger leaky_relu_ledger() {
  return oracle::parse_ledger(R"({"format": "quorum.known", "backend": "faulty", "entries": [
    {"id": "faulty-leaky-alpha", "backend": "faulty:leaky-relu-big-alpha-halved", "class": "bug",
     "signature": "inconsistency|FC|faulty|leaky_relu|{}", "note": "leaky_relu halves a big alpha",
     "case": {"mode": "infer",
              "model": {"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}], "outputs": ["y"],
                        "nodes": [{"name": "y", "op": "leaky_relu", "inputs": ["x"], "outputs": ["y"],
                                   "attrs": {"alpha": 0.7}}]},
              "inputs": {"x": {"shape": [1, 4], "data": [-2, -1, 0.5, 1]}}}}]})",
                              "test ledger");
}

TEST(Transfer, SiblingsAreTheFamilysOperatorsThatTakeTheNodesInputs) {
  const auto eltwise = sibling_ops("leaky_relu", 1);
  EXPECT_NE(std::find(eltwise.begin(), eltwise.end(), "elu"), eltwise.end());
  EXPECT_NE(std::find(eltwise.begin(), eltwise.end(), "relu"), eltwise.end());
  EXPECT_EQ(std::find(eltwise.begin(), eltwise.end(), "leaky_relu"), eltwise.end());  // not itself
  EXPECT_EQ(std::find(eltwise.begin(), eltwise.end(), "add"), eltwise.end());         // another family
  const auto binary = sibling_ops("maximum", 2);
  EXPECT_NE(std::find(binary.begin(), binary.end(), "minimum"), binary.end());
  EXPECT_TRUE(sibling_ops("mse_loss", 2).empty());  // losses are never replaced
  EXPECT_TRUE(sibling_ops("no_such_op", 1).empty());
}

TEST(Transfer, ReplacingAnOperatorKeepsItsAttributesWhereTheSiblingHasThemAndDrawsNewWeights) {
  const oracle::Ledger l = leaky_relu_ledger();
  core::Rng rng(5);
  const ir::Graph elu = replace_op(l.entries[0].model, "y", "elu", rng);
  ASSERT_EQ(elu.nodes.size(), 1u);
  EXPECT_EQ(elu.nodes[0].op, "elu");
  EXPECT_DOUBLE_EQ(core::attr_f(elu.nodes[0].attrs, "alpha"), 0.7);  // the same name: kept
  const ir::Graph relu = replace_op(l.entries[0].model, "y", "relu", rng);
  EXPECT_TRUE(relu.nodes[0].attrs.empty());  // relu has no alpha
  // A conv with weights becomes a conv of another rank only where the shape rule accepts it.
  std::string ones;
  for (int i = 0; i < 54; ++i) ones += (i ? ", " : "") + std::string("1");
  const ir::Graph conv = ir::graph_from_json(
      R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [1, 2, 5, 5]}], "outputs": ["c"],
          "initializers": [{"name": "c.weight", "dtype": "float32", "shape": [3, 2, 3, 3], "data": [)" + ones +
          R"(]}, {"name": "c.bias", "dtype": "float32", "shape": [3], "data": [0, 0, 0]}],
          "nodes": [{"name": "c", "op": "conv2d", "inputs": ["x", "c.weight", "c.bias"], "outputs": ["c"],
                     "attrs": {"out_channels": 3}}]})",
      "conv");
  EXPECT_THROW(replace_op(conv, "c", "conv1d", rng), core::UserError);
  const ir::Graph tconv = replace_op(conv, "c", "conv_transpose2d", rng);
  EXPECT_EQ(tconv.nodes[0].op, "conv_transpose2d");
  EXPECT_EQ(tconv.types.at("c").shape[1], 3);  // out_channels kept
  // conv_transpose2d's weight is [C, out_channels, kH, kW]: drawn anew, the conv's own no longer fits.
  EXPECT_EQ(tconv.initializers.at(tconv.nodes[0].inputs.at(1)).shape()[0], 2);
}

TEST(Transfer, APlantedSiblingFaultBecomesANewFindingThatNamesItsEntry) {
  const oracle::Ledger l = leaky_relu_ledger();
  TransferOptions opt;
  opt.backends = parse_backends("faulty:elu-alpha-ignored");  // elu ignores its alpha; leaky_relu is right
  WorkerSet workers(opt.backends, opt.limits);
  const auto variants = transfer_known(l, opt, workers);
  std::vector<std::string> fresh;
  const TransferVariant* from = nullptr;
  for (const auto& v : variants)
    for (const auto& f : v.fresh) {
      fresh.push_back(f.signature());
      from = &v;
    }
  ASSERT_EQ(fresh.size(), 1u) << "the entry's own case is clean on this backend, only its elu sibling is not";
  EXPECT_EQ(fresh[0], "inconsistency|FC|faulty:elu-alpha-ignored|elu|{}");
  EXPECT_EQ(from->origin(), "transfer from ledger entry faulty-leaky-alpha (elu in place of leaky_relu)");

  // The entry's case as it is on its own library is the entry (known), never new.
  opt.backends = parse_backends("faulty:leaky-relu-big-alpha-halved");
  opt.siblings = false;
  WorkerSet own_workers(opt.backends, opt.limits);
  const auto own = transfer_known(l, opt, own_workers);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_TRUE(own[0].fresh.empty());
  ASSERT_FALSE(own[0].evaluation.findings.empty());
  EXPECT_EQ(own[0].evaluation.findings[0].known, "faulty-leaky-alpha");
}

// The campaign option: the variants come first, as models -1, -2, ..., into the campaign's store,
// their bundles naming the entry; a resumed campaign does not run them again.
TEST(Transfer, ACampaignWithTransferRecordsTheVariantsAsModelsOfItsOwn) {
  CampaignOptions opt;
  opt.generator = "none";
  opt.setup.backends = parse_backends("faulty:elu-alpha-ignored");
  opt.setup.mode = Mode::Infer;
  opt.setup.known = std::make_shared<const oracle::Ledger>(leaky_relu_ledger());
  opt.models = 1;
  opt.seed = 3;
  opt.transfer = true;
  opt.quiet = true;
  const fs::path out = fs::temp_directory_path() / ("quorum_transfer_campaign_" + std::to_string(::getpid()));
  fs::remove_all(out);
  opt.out = out.string();
  const ModelFactory none = [](int64_t, core::Rng&) -> ModelCase { throw std::runtime_error("no model"); };
  std::ostringstream log;
  const Summary s = run_campaign(opt, none, log);
  EXPECT_GT(s.transfer_variants, 1);
  EXPECT_EQ(s.transfer_new, 1);
  const auto findings = store::open_sqlite_store(opt.out)->findings();
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].signature, "inconsistency|FC|faulty:elu-alpha-ignored|elu|{}");
  EXPECT_LT(findings[0].first_model, 0);
  EXPECT_EQ(read_finding(findings[0].bundle).value("origin", ""),
            "transfer from ledger entry faulty-leaky-alpha (elu in place of leaky_relu)");
  const Summary again = run_campaign(opt, none, log);
  EXPECT_EQ(again.transfer_variants, 0);  // every variant done
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::campaign
