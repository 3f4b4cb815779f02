// A recurrent layer's given initial state (initial_state 1: h0 and LSTM's c0 [D*H], one for every sample)
// on every library that runs recurrent layers: libtorch's hx, oneDNN's src_iter (forward and backward, the
// state's gradient included), Arm NN's unrolled constant state, and ONNX Runtime's and OpenCV's initial_h /
// initial_c as the exporter writes them. Each runs the layer through `quorum run` against the float64
// reference (one backward pass with a loss where the library trains) and agrees; a library that ignored the
// state would differ at every step of a sample (the first step's state is far from zero here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "run_quorum.h"
#include "worker/supervisor.h"

namespace quorum::backends {
namespace {

// One layer over x [2, 3, 2], H 2, the weights and the state written out (values of order 1).
std::string model(const std::string& op, const std::string& direction) {
  const int g = op == "lstm" ? 4 : op == "gru" ? 3 : 1, d = direction == "bidirectional" ? 2 : 1;
  auto values = [](int n, double phase) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(0.9 * std::sin(1.7 * i + phase));
    return "[" + s + "]";
  };
  auto init = [&](const std::string& name, const std::string& shape, int n, double phase) {
    return R"({"name": ")" + name + R"(", "dtype": "float32", "shape": )" + shape + R"(, "data": )" +
           values(n, phase) + "}";
  };
  const int rows = d * g * 2;
  std::string inits = init("w_ih", "[" + std::to_string(rows) + ", 2]", rows * 2, 0.3) + ", " +
                      init("w_hh", "[" + std::to_string(rows) + ", 2]", rows * 2, 1.1) + ", " +
                      init("b_ih", "[" + std::to_string(rows) + "]", rows, 2.0) + ", " +
                      init("b_hh", "[" + std::to_string(rows) + "]", rows, 2.9) + ", " +
                      init("h0", "[" + std::to_string(d * 2) + "]", d * 2, 0.7);
  std::string ins = R"("x", "w_ih", "w_hh", "b_ih", "b_hh", "h0")";
  if (op == "lstm") {
    inits += ", " + init("c0", "[" + std::to_string(d * 2) + "]", d * 2, 4.0);
    ins += R"(, "c0")";
  }
  return R"({"inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3, 2]}], "outputs": ["r"], "initializers": [)" +
         inits + R"(], "nodes": [{"name": "r", "op": ")" + op + R"(", "inputs": [)" + ins +
         R"(], "outputs": ["r"], "attrs": {"hidden_size": 2, "return_sequences": 1, "direction": ")" + direction +
         R"(", "initial_state": 1}}]})";
}

TEST(RnnInitialState, EveryLibraryStartsFromTheGivenState) {
  const auto& have = worker::available_backends();
  std::string backends;
  for (const char* b : {"torch", "onednn", "armnn", "opencv", "ort"})
    if (std::find(have.begin(), have.end(), b) != have.end()) backends += (backends.empty() ? "" : ",") + std::string(b);
  if (backends.empty()) GTEST_SKIP() << "no library backend with recurrent layers is built";
  const auto dir = quorum::testing::scratch("rnn_initial_state");
  // OpenCV has no RNN layer, and oneDNN's bidirectional layer is not lowered: each is refused with its reason.
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
    if (backends.find("onednn") != std::string::npos && direction != "bidirectional") {
      EXPECT_NE(outcomes.find("onednn: ok (trained)"), std::string::npos) << outcomes;
    }
    if (backends.find("opencv") != std::string::npos && op == "lstm") {
      EXPECT_NE(outcomes.find("opencv: ok"), std::string::npos) << outcomes;
    }
  }
}

}  // namespace
}  // namespace quorum::backends
