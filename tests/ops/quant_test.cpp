// The quantized operators against hand-computed cases: rounding ties (half to even), saturation at both
// ends of int8 and uint8, zero points, an int32 bias, a convolution's padding holding the zero point, and
// an accumulator past int16 (the pair sums some instruction sets saturate); the generator's quantization
// of a float model; and the planted fault a quantized campaign must find.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "gen/quantize.h"
#include "ir/build.h"
#include "ops/quant_util.h"
#include "ops/registry.h"
#include "support/run_op.h"
#include "ref/interpreter.h"
#include "run_quorum.h"

namespace quorum::ops {
namespace {

using core::DType;

using testing::run_op;

TEST(Quant, QuantizeRoundsHalfToEvenAndSaturates) {
  const Tensor x = Tensor::f64({8}, {2.5, 3.5, -2.5, 1000, -1000, 0.5, -0.5, 1.5});
  EXPECT_EQ(run_op("quantize_linear", {x}, {{"scale", 1.0}, {"zero_point", int64_t{0}}, {"to", std::string("int8")}}),
            (std::vector<double>{2, 4, -2, 127, -128, 0, 0, 2}));
  EXPECT_EQ(run_op("quantize_linear", {x}, {{"scale", 1.0}, {"zero_point", int64_t{0}}, {"to", std::string("uint8")}}),
            (std::vector<double>{2, 4, 0, 255, 0, 0, 0, 2}));
  // scale 0.5, zero point -3: x / 0.5 = 5, 7, -5 (exact), then + zp
  EXPECT_EQ(run_op("quantize_linear", {Tensor::f64({3}, {2.5, 3.5, -2.5})},
                {{"scale", 0.5}, {"zero_point", int64_t{-3}}, {"to", std::string("int8")}}),
            (std::vector<double>{2, 4, -8}));
  // the zero point is checked against the type
  EXPECT_THROW(
      ops::op("quantize_linear")
          .infer({{DType::F32, {2}}}, canonical_attrs(ops::op("quantize_linear"),
                                                      {{"zero_point", int64_t{200}}, {"to", std::string("int8")}})),
      core::OpError);
}

TEST(Quant, DequantizeSubtractsTheZeroPoint) {
  EXPECT_EQ(
      run_op("dequantize_linear", {Tensor::f64({3}, {0, 128, 255})}, {{"scale", 0.25}, {"zero_point", int64_t{128}}}),
      (std::vector<double>{-32, 0, 31.75}));
}

TEST(Quant, QlinearMatmulAccumulatesExactlyAndRequantizes) {
  // a [1, 2] uint8 zp 128, w [2, 2] int8 zp 0: acc = (200-128)*100 + (0-128)*(-100) = 7200 + 12800 = 20000 and
  // (255-128)*127 + (255-128)*127 = 32258 (past int16: pair sums saturate there on some instruction sets)
  const Tensor a = Tensor::f64({1, 2}, {200, 0});
  const Tensor a2 = Tensor::f64({1, 2}, {255, 255});
  const Tensor w = Tensor::f64({2, 2}, {100, 127, -100, 127});
  Attrs at = {{"units", int64_t{2}},
              {"a_scale", 1.0},
              {"a_zero_point", int64_t{128}},
              {"w_scale", 1.0},
              {"w_zero_point", int64_t{0}},
              {"w_type", std::string("int8")},
              {"y_scale", 256.0},
              {"y_zero_point", int64_t{10}},
              {"to", std::string("uint8")}};
  // 20000/256 = 78.125 -> 78 + 10; (200-128)*127 - 128*127 = -7112 / 256 = -27.78 -> -28 + 10 = -18 -> 0
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{88, 0}));
  // 7*(127*100) ... the second: 127*100 - 127*100 = 0 -> 10; 127*127*2 = 32258 / 256 = 126.01 -> 126 + 10
  EXPECT_EQ(run_op("qlinear_matmul", {a2, w}, at), (std::vector<double>{10, 136}));
  // a tie: 20000 / 320 = 62.5 -> 62 (even) + 10
  at["y_scale"] = 320.0;
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at)[0], 72);
}

TEST(Quant, AnAccumulatorPastInt32IsExact) {
  // K = 33100 terms of (0 - 255) * (127 - (-128)) = -65025: acc = -2 152 327 500, below -2^31. Exact, it requantizes
  // (y_scale 2^24) to -128.3 -> -128; an int32 sum would have wrapped to +2 142 639 796 and saturated at 127.
  const int64_t k = 33100;
  const Tensor a = Tensor::f64({1, k}, std::vector<double>(static_cast<size_t>(k), 0));
  const Tensor w = Tensor::f64({k, 1}, std::vector<double>(static_cast<size_t>(k), 127));
  const Attrs at = {{"units", int64_t{1}},     {"a_scale", 1.0},     {"a_zero_point", int64_t{255}},
                    {"w_scale", 1.0},          {"w_zero_point", int64_t{-128}}, {"w_type", std::string("int8")},
                    {"y_scale", 16777216.0},   {"y_zero_point", int64_t{0}},    {"to", std::string("int8")}};
  EXPECT_EQ(run_op("qlinear_matmul", {a, w}, at), (std::vector<double>{-128}));
}

TEST(Quant, QlinearConvPadsWithTheZeroPointAndAddsAnInt32Bias) {
  // x [1, 1, 1, 2] int8 zp 5, w [1, 1, 1, 3] int8 zp -1, pads 1 on each side of the width: the padded cells
  // hold x's zero point, so they add 0. y[0] = (pad)(w0+1) + (7-5)(w1+1) + (9-5)(w2+1), bias 3 in acc units.
  const Tensor x = Tensor::f64({1, 1, 1, 2}, {7, 9});
  const Tensor w = Tensor::f64({1, 1, 1, 3}, {1, 2, 3});
  const Tensor b = Tensor::f64({1}, {3});
  const Attrs at = {{"out_channels", int64_t{1}},
                    {"kernel_shape", std::vector<int64_t>{1, 3}},
                    {"pads", std::vector<int64_t>{0, 1, 0, 1}},
                    {"x_scale", 1.0},
                    {"x_zero_point", int64_t{5}},
                    {"w_scale", 1.0},
                    {"w_zero_point", int64_t{-1}},
                    {"y_scale", 1.0},
                    {"y_zero_point", int64_t{-100}},
                    {"bias", int64_t{1}}};
  // y0 = 2*3 + 4*4 + 3 = 25; y1 = 2*2 + 4*3 + 3 = 19; then + zp -100
  EXPECT_EQ(run_op("qlinear_conv2d", {x, w, b}, at), (std::vector<double>{-75, -81}));
}

// A zero point at an end of its type, or a scale a fraction of the range's: the quantizer's drawn extremes.
bool extreme(const core::Attrs& a, const std::string& p) {
  const int64_t zp = core::attr_i(a, p + "zero_point");
  return zp == -128 || zp == 127 || zp == 0 || zp == 255 || core::attr_f(a, p + "scale") < 1.0 / 255;
}

TEST(Quant, AFloatModelIsQuantizedAroundItsConvolutionAndKeepsItsOutputs) {
  int plain = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    ir::Graph g;
    g.inputs.push_back({"x", {DType::F32, {1, 2, 5, 5}}});
    g.nodes.push_back({"conv", "conv2d", {"x", "w", "b"}, {"y"},
                       {{"out_channels", int64_t{3}}, {"kernel_shape", std::vector<int64_t>{3, 3}}}});
    g.nodes.push_back({"act", "relu", {"y"}, {"z"}, {}});
    g.outputs = {"z"};
    core::Rng rng(seed);
    g.initializers["w"] = Tensor(DType::F32, {3, 2, 3, 3});
    g.initializers["b"] = Tensor(DType::F32, {3});
    for (int64_t i = 0; i < 54; ++i) g.initializers["w"].set(i, rng.normal(0, 0.3));
    for (int64_t i = 0; i < 3; ++i) g.initializers["b"].set(i, rng.normal(0, 0.3));
    ir::validate(g, "t");
    ref::ValueMap in;
    in["x"] = Tensor(DType::F64, {1, 2, 5, 5});
    for (int64_t i = 0; i < 50; ++i) in["x"].set(i, rng.uniform(-1, 1));
    const ref::ValueMap before = ref::forward(g, in);
    ASSERT_EQ(gen::quantize_model(g, in, rng), 1);
    std::vector<std::string> ops_;
    for (const auto& n : g.nodes) ops_.push_back(n.op);
    ASSERT_EQ(ops_, (std::vector<std::string>{"quantize_linear", "qlinear_conv2d", "dequantize_linear", "relu"}));
    EXPECT_EQ(g.types.at("y").dtype, DType::F32);
    EXPECT_FALSE(g.initializers.count("w"));  // the float weight is gone, its int8 form read instead
    // Without a drawn extreme, the quantized model computes what the float one does within a few output steps
    // (symmetric int8's zero point 0 counts as an extreme here: it clips nothing, but is not told apart).
    const core::Attrs& c = g.nodes[1].attrs;
    if (extreme(c, "x_") || extreme(c, "y_") || core::attr_i(c, "w_zero_point") != 0) continue;
    ++plain;
    const ref::ValueMap after = ref::forward(g, in);
    const double step = core::attr_f(c, "y_scale");
    for (int64_t i = 0; i < before.at("z").numel(); ++i)
      EXPECT_NEAR(after.at("z").get(i), before.at("z").get(i), 8 * step) << seed << " " << i;
  }
  EXPECT_GT(plain, 0);
}

// The float32 spread's trials that move every stored value down, then up: the two sides of a tie.
std::vector<std::vector<double>> spread_sides(const std::string& op, const std::vector<Tensor>& in, const Attrs& a) {
  std::vector<std::vector<double>> sides;
  core::Rng rng(1);
  for (const int direction : {-1, 1}) {
    StoredPrecision scope(true, 0x1p-24, true, false, rng, direction);
    sides.push_back(run_op(op, in, a));
  }
  return sides;
}

TEST(Quant, ATieEveryFloat32FormulationFormsExactlyIsJudgedHalfToEven) {
  using V = std::vector<double>;
  // 0.25 / 0.5 = 0.5 and 0.25 * (1 / 0.5) = 0.5 exactly, and -1.25 / 0.5 = -2.5: both sides round half to even
  // (half away from zero, ArmNN's Quantize, gives 1 and -3).
  const Attrs q = {{"scale", 0.5}, {"zero_point", int64_t{0}}, {"to", std::string("int8")}};
  const Tensor x = Tensor::f64({2}, {0.25, -1.25});
  EXPECT_EQ(spread_sides("quantize_linear", {x}, q), (std::vector<V>{{0, -2}, {0, -2}}));
  // 1.875 / 0.75 = 2.5 is a float32 value too, but 1 / 0.75 is not: x * (1 / scale) may land on either side.
  const Attrs q3 = {{"scale", 0.75}, {"zero_point", int64_t{0}}, {"to", std::string("int8")}};
  EXPECT_EQ(spread_sides("quantize_linear", {Tensor::f64({1}, {1.875})}, q3), (std::vector<V>{{2}, {3}}));
  // A quantized product: acc = 1 * 3 = 3, times 0.5 * 1 / 1 = 1.5 exactly in every order: judged (2).
  const Attrs m = {{"units", int64_t{1}}, {"a_scale", 0.5}, {"w_scale", 1.0}, {"y_scale", 1.0}};
  const Tensor a = Tensor::f64({1, 1}, {1}), w = Tensor::f64({1, 1}, {3});
  EXPECT_EQ(spread_sides("qlinear_matmul", {a, w}, m), (std::vector<V>{{2}, {2}}));
  // y_scale 1.5 is no power of two (x_scale * w_scale / y_scale = 0.5 is exact, 1 / 1.5 is not): either side.
  const Attrs m3 = {{"units", int64_t{1}}, {"a_scale", 0.75}, {"w_scale", 1.0}, {"y_scale", 1.5}};
  EXPECT_EQ(spread_sides("qlinear_matmul", {a, w}, m3), (std::vector<V>{{1}, {2}}));
  // The rule itself: every partial product must be a float32 value (an accumulator past 2^24 is not).
  EXPECT_TRUE(exact_in_float32({3, 0.5, 1}, {0.25}));
  EXPECT_FALSE(exact_in_float32({16777217, 0.5}, {1}));
  EXPECT_FALSE(exact_in_float32({3, 0x1p-100, 0x1p-100}, {0x1p100}));  // 2^-200 leaves float32's range
  EXPECT_FALSE(exact_in_float32({1}, {3}));
}

TEST(Quant, ACampaignFindsQuantizationRoundingTiesHalfAwayAndNamesTheNode) {
  const auto dir = testing::scratch("quant_tie_fault");
  std::filesystem::remove_all(dir / "c");
  const auto r = testing::run_quorum(
      "fuzz --generator unit --dtype int8 --backends faulty:qlinear-round-half-away "
      "--models 24 --seed 7 --reduce 4 --out " +
          (dir / "c").string(),
      "quant_tie_fault");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("inconsistency|FC|faulty:qlinear-round-half-away|q"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" -> 1 nodes, caused by "), std::string::npos) << r.out;  // reduced to the one node
  EXPECT_EQ(r.out.find("dequantize_linear|"), std::string::npos) << r.out;  // only the faulty operators
}

TEST(Quant, ACampaignFindsAQuantizedZeroPointAddedTwiceAndNamesTheNode) {
  const auto dir = testing::scratch("quant_fault");
  std::filesystem::remove_all(dir / "c");
  const auto r = testing::run_quorum(
      "fuzz --generator unit --dtype int8 --backends faulty:qlinear-zero-point-twice "
      "--models 24 --seed 7 --reduce 4 --out " +
          (dir / "c").string(),
      "quant_fault");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("inconsistency|FC|faulty:qlinear-zero-point-twice|qlinear_"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("quantize_linear|"), std::string::npos) << r.out;  // only the faulty operators
  const auto bad = testing::run_quorum("fuzz --dtype int4 --backends faulty --models 1 --out " + (dir / "x").string(),
                                       "quant_fault");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--dtype: expected float32, float64 or int8"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace
}  // namespace quorum::ops
