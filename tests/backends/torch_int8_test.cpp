// libtorch's quantized path through the real worker (--dtype int8): QuantizeLinear, DequantizeLinear, QLinearConv
// and QLinearMatMul on libtorch's quantized tensors and its registered quantized operators, on both quantized
// engines of Debian's build (onednn, the default, and torch:qengine=qnnpack). Every finding a short campaign
// records is a ledger entry's, and what an engine cannot take is refused with its reason, not a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "campaign/store.h"
#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

namespace fs = std::filesystem;

bool torch_built() {
  const auto& have = worker::available_backends();
  return std::find(have.begin(), have.end(), "torch") != have.end();
}

TEST(TorchInt8, QuantizedUnitModelsReportOnlyLedgerEntries) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const fs::path out = testing::scratch("torch_int8_test") / "campaign";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum("fuzz --generator unit --dtype int8 --backends "
                                                "torch,torch:qengine=qnnpack --models 120 --jobs 1 --seed 17 --out " +
                                                    out.string(),
                                                "torch_int8_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // Each engine ran quantized models, and each refused what it cannot take, with the measured reason.
  EXPECT_NE(r.out.find("takes symmetric weights only"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("QNNPACK takes a requantization scale"), std::string::npos) << r.out;
  const auto store = campaign::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 120);
  for (const auto& f : store->findings())
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
  fs::remove_all(out);
}

// Per-channel weights (w_scales) on both engines: the convolution and matmul cases (three tenths per channel) run as
// libtorch's per-channel qint8 weights, none is refused as unlowered, and every finding is a ledger entry's.
TEST(TorchInt8, PerChannelWeightsReportOnlyLedgerEntries) {
  if (!torch_built()) GTEST_SKIP() << "torch backend not built";
  const fs::path out = testing::scratch("torch_int8_test") / "per_channel";
  fs::remove_all(out);
  const testing::Result r = testing::run_quorum("fuzz --generator unit --dtype int8 --backends "
                                                "torch,torch:qengine=qnnpack --ops qlinear_conv2d,qlinear_matmul "
                                                "--models 60 --jobs 1 --seed 23 --out " + out.string(),
                                                "torch_int8_test");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("are not lowered"), std::string::npos) << r.out;
  const auto store = campaign::open_sqlite_store(out.string());
  EXPECT_EQ(store->models_done(), 60);
  for (const auto& f : store->findings())
    EXPECT_FALSE(f.known.empty()) << "not in the ledger: " << f.signature << " (root cause " << f.root_cause << ")";
  fs::remove_all(out);
}

}  // namespace
}  // namespace quorum::backends
