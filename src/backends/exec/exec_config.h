// The exec backend's options and output order, shared by the backend and its reproducer writer.
#pragma once
#include <string>
#include <vector>

#include "backends/exec/program_session.h"
#include "ir/graph.h"
#include "ir/onnx_io.h"

namespace quorum::backends::exec {

constexpr double kDefaultTimeLimit = 20;  // seconds; below the supervisor's --timeout (60)

struct Config {
  double time_limit_s = kDefaultTimeLimit;
  int opset = 13;  // the default the docs give; opset=N picks 11 to 17
  std::string label;
  bool persistent = false;  // one program per worker, one model directory per request line
  bool forms = false;       // each model in its seeded exchange form (ir::OnnxForm), not the plain one
  std::vector<std::string> argv;  // the program (resolved) and its arguments; empty = none given

  Runner runner() const { return Runner{argv, time_limit_s, persistent}; }
};

// Options (--backends exec:OPT+OPT+...): leading timeout=SECONDS, opset=N, name=LABEL, persistent and forms, then the
// program (resolved on $PATH) and its arguments, passed verbatim. UserError on a bad option or a
// program that is not an executable file.
Config parse(const std::vector<std::string>& args);

// The form a model is written in: the configured opset, the model's form seed with `forms`.
ir::OnnxForm onnx_form(const Config& c, const ir::Graph& g);

}  // namespace quorum::backends::exec
