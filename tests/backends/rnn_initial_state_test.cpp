// A recurrent layer's given initial state (initial_state 1: h0 and LSTM's c0 [D*H], one for every sample)
// on every library that runs recurrent layers: libtorch's hx, oneDNN's src_iter (forward and backward, the
// state's gradient included), Arm NN's unrolled constant state, and ONNX Runtime's and OpenCV's initial_h /
// initial_c as the exporter writes them. Each runs the layer through `quorum run` against the float64
// reference (one backward pass with a loss where the library trains) and agrees; a library that ignored the
// state would differ at every step of a sample (the first step's state is far from zero here). And oneDNN's
// bidirectional_concat for every cell it has, with and without a given state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

// One layer over x [2, 3, 2], H 2, the weights and the state written out (values of order 1).
std::string model(const std::string& op, const std::string& direction, bool init = true,
                  const std::string& extra_attrs = "") {
  const int g = op == "lstm" ? 4 : op == "gru" ? 3 : 1, d = direction == "bidirectional" ? 2 : 1;
  auto values = [](int n, double phase) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(0.9 * std::sin(1.7 * i + phase));
    return "[" + s + "]";
  };
  auto param = [&](const std::string& name, const std::string& shape, int n, double phase) {
    return R"({"name": ")" + name + R"(", "dtype": "float32", "shape": )" + shape + R"(, "data": )" +
           values(n, phase) + "}";
  };
  const int rows = d * g * 2;
  std::string inits = param("w_ih", "[" + std::to_string(rows) + ", 2]", rows * 2, 0.3) + ", " +
                      param("w_hh", "[" + std::to_string(rows) + ", 2]", rows * 2, 1.1) + ", " +
                      param("b_ih", "[" + std::to_string(rows) + "]", rows, 2.0) + ", " +
                      param("b_hh", "[" + std::to_string(rows) + "]", rows, 2.9);
  std::string ins = R"("x", "w_ih", "w_hh", "b_ih", "b_hh")";
  if (extra_attrs.find("peepholes") != std::string::npos) {
    inits += ", " + param("p", "[" + std::to_string(d * 6) + "]", d * 6, 5.2);
    ins += R"(, "p")";
  }
  if (init) {
    inits += ", " + param("h0", "[" + std::to_string(d * 2) + "]", d * 2, 0.7);
    ins += R"(, "h0")";
  }
  if (init && op == "lstm") {
    inits += ", " + param("c0", "[" + std::to_string(d * 2) + "]", d * 2, 4.0);
    ins += R"(, "c0")";
  }
  return R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3, 2]}], "outputs": ["r"], "initializers": [)" +
         inits + R"(], "nodes": [{"name": "r", "op": ")" + op + R"(", "inputs": [)" + ins +
         R"(], "outputs": ["r"], "attrs": {"hidden_size": 2, "return_sequences": 1, "direction": ")" + direction +
         R"(", "initial_state": )" + (init ? "1" : "0") + extra_attrs + "}}]}";
}

TEST(RnnInitialState, EveryLibraryStartsFromTheGivenState) {
  const auto& have = worker::available_backends();
  std::string backends;
  for (const char* b : {"torch", "onednn", "armnn", "opencv", "ort"})
    if (std::find(have.begin(), have.end(), b) != have.end())
      backends += (backends.empty() ? "" : ",") + std::string(b);
  if (backends.empty()) GTEST_SKIP() << "no library backend with recurrent layers is built";
  const auto dir = quorum::testing::scratch("rnn_initial_state");
  // OpenCV has no RNN layer (refused with the reason); oneDNN runs the bidirectional LSTM as bidirectional_concat.
  for (const auto& [op, direction] : std::vector<std::pair<std::string, std::string>>{
           {"lstm", "forward"}, {"gru", "forward"}, {"simple_rnn", "reverse"}, {"lstm", "bidirectional"}}) {
    SCOPED_TRACE(op + " " + direction);
    const auto path = dir / (op + "_" + direction + ".json");
    std::ofstream(path) << model(op, direction);
    const auto r = quorum::testing::run_quorum(
        "run " + path.string() + " --backends " + backends + " --loss mse_loss --seed 7", "rnn_initial_state");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("findings: none"), std::string::npos) << r.out;
    // Each library ran (or refused with a reason), none failed.
    const auto outcomes = r.out.substr(r.out.find("outcomes:"));
    EXPECT_EQ(outcomes.find("crash"), std::string::npos) << outcomes;
    for (const char* b : {"torch", "armnn", "ort"}) {
      if (backends.find(b) != std::string::npos) {
        EXPECT_NE(outcomes.find(std::string(b) + ": ok"), std::string::npos) << outcomes;
      }
    }
    if (backends.find("onednn") != std::string::npos) {
      EXPECT_NE(outcomes.find("onednn: ok (trained)"), std::string::npos) << outcomes;
    }
    if (backends.find("opencv") != std::string::npos && op == "lstm") {
      EXPECT_NE(outcomes.find("opencv: ok"), std::string::npos) << outcomes;
    }
  }
}

TEST(RnnInitialState, OnednnRunsEveryCellBidirectionalForwardAndBackward) {
  const auto& have = worker::available_backends();
  if (std::find(have.begin(), have.end(), "onednn") == have.end()) GTEST_SKIP() << "onednn backend not built";
  const auto dir = quorum::testing::scratch("rnn_bidirectional");
  for (const auto& [op, extra] : std::vector<std::pair<std::string, std::string>>{
           {"lstm", R"(, "peepholes": 1)"},
           {"gru", R"(, "linear_before_reset": 0)"},
           {"gru", ""},
           {"simple_rnn", R"(, "activation": "sigmoid")"}})
    for (bool init : {false, true}) {
      SCOPED_TRACE(op + extra + (init ? " with h0" : ""));
      const auto path = dir / (op + (init ? "_h0" : "") + ".json");
      std::ofstream(path) << model(op, "bidirectional", init, extra);
      const auto r = quorum::testing::run_quorum(
          "run " + path.string() + " --backends onednn --loss mse_loss --seed 7", "rnn_bidirectional");
      ASSERT_EQ(r.code, 0) << r.out << r.err;
      EXPECT_NE(r.out.find("onednn: ok (trained)"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("findings: none"), std::string::npos) << r.out;
    }
}

}  // namespace
}  // namespace quorum::backends
