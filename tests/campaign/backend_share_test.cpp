// Every backend exercised (docs/generators.md): the store counts, per backend, the models it ran, refused
// (by reason) and was not sent, and a resumed campaign keeps the counts; the share policy makes a backend
// that does not map a dozen common layer types run at least a third of a 300-model campaign, where
// models drawn freely (--backend_share 0) give it less; gen --index of such a campaign is
// gen_cli_test's.
#include <gtest/gtest.h>

#include <filesystem>

#include "store/store.h"
#include "run_quorum.h"

namespace quorum::campaign {
namespace {

namespace fs = std::filesystem;
using testing::run_quorum;

// The planted backend: the reference that does not map these (faulty's refuse-op, docs/backends.md).
const char* const kRefused[] = {"relu",    "tanh",       "sigmoid",    "conv2d", "add",     "mul",
                                "sub",     "max_pool2d", "avg_pool2d", "exp",    "concat",  "batch_norm",
                                "maximum", "minimum",    "abs",        "elu",    "softplus"};

std::string faulty() {
  std::string spec = "faulty";
  for (const char* op : kRefused) spec += std::string(spec == "faulty" ? ":" : "+") + "refuse-op=" + op;
  return spec;
}

std::string fuzz(const std::string& dir, int models, const std::string& more = "") {
  return "fuzz --generator muffin --backends ref," + faulty() + " --reduce 0 --seed 7 --jobs 2 --models " +
         std::to_string(models) + " --out " + dir + more;
}

// ran / (ran + refused + not sent) of `backend`, and its counts as text.
double share(store::Store& s, const std::string& backend, std::string* text = nullptr) {
  for (const auto& c : s.backend_counts()) {
    if (c.models.backend != backend) continue;
    const int64_t all = c.models.ran + c.refused + c.not_sent;
    if (text) {
      *text = c.models.backend + " ran " + std::to_string(c.models.ran) + " crashed " +
              std::to_string(c.models.crashed) + " failed " + std::to_string(c.models.failed) + " refused " +
              std::to_string(c.refused) + " not sent " + std::to_string(c.not_sent) + " models " +
              std::to_string(c.models.model) + "\n";
      for (const auto& r : c.refusals) *text += "  " + r.refusal + " " + std::to_string(r.refused) + " " + r.ops + "\n";
    }
    return all ? static_cast<double>(c.models.ran) / static_cast<double>(all) : 0.0;
  }
  return -1;
}

TEST(BackendShare, EveryBackendRunsAThirdOfTheModels) {
  const fs::path d = testing::scratch("share");
  const std::string free_dir = (d / "free").string(), policy_dir = (d / "policy").string();
  auto r = run_quorum(fuzz(free_dir, 300, " --backend_share 0"), "share");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string text;
  const double free_share = share(*store::open_sqlite_store(free_dir), faulty(), &text);
  std::cout << "drawn freely: " << text;
  EXPECT_LT(free_share, 1.0 / 3) << "the planted backend must refuse most free models, or the test proves nothing";
  EXPECT_GE(free_share, 0);
  r = run_quorum(fuzz(policy_dir, 300), "share");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto store = store::open_sqlite_store(policy_dir);
  const double policy_share = share(*store, faulty(), &text);
  std::cout << "with the policy: " << text;
  EXPECT_GE(policy_share, 1.0 / 3);
  EXPECT_GE(share(*store, "ref"), 1.0 / 3);
  // Counted per model and backend; a refusal under the backend's reason with the operator it names.
  for (const auto& c : store->backend_counts()) {
    EXPECT_EQ(c.models.model, 300) << c.models.backend;
    EXPECT_EQ(c.models.ran + c.refused + c.not_sent, 300) << c.models.backend;
    EXPECT_GT(c.models.seconds, 0) << c.models.backend;
  }
  EXPECT_NE(text.find("reason: node: refuse-op: faulty does not map "), std::string::npos) << text;
  // The summary says it too.
  EXPECT_NE(r.out.find("backends (models of the campaign"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  ref: ran 300/300 (100.0%)"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(BackendShare, AResumedCampaignKeepsTheCounts) {
  const fs::path d = testing::scratch("share_resume");
  const std::string whole = (d / "whole").string(), split = (d / "split").string();
  ASSERT_EQ(run_quorum(fuzz(whole, 30), "share_resume").code, 0);
  ASSERT_EQ(run_quorum(fuzz(split, 12), "share_resume").code, 0);
  const auto r = run_quorum(fuzz(split, 30), "share_resume");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string a, b;
  share(*store::open_sqlite_store(whole), faulty(), &a);
  share(*store::open_sqlite_store(split), faulty(), &b);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find(" models 30\n"), std::string::npos) << a;
  fs::remove_all(d);
}

}  // namespace
}  // namespace quorum::campaign
