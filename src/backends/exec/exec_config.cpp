#include "backends/exec/exec_config.h"

#include <cmath>
#include <cstdlib>

#include "backends/exec/run_program.h"
#include "core/error.h"

namespace quorum::backends::exec {

Config parse(const std::vector<std::string>& args) {
  Config c;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto eq = a.find('=');
    const std::string key = eq == std::string::npos ? "" : a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "timeout") {
      char* end = nullptr;
      c.time_limit_s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(c.time_limit_s) || c.time_limit_s <= 0)
        throw core::UserError("exec: timeout=" + value + ": expected a positive number of seconds");
    } else if (key == "opset") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < ir::kOnnxMinOpset || v > ir::kOnnxMaxOpset)
        throw core::UserError("exec: opset=" + value + ": the ONNX exporter writes opsets " +
                              std::to_string(ir::kOnnxMinOpset) + " to " + std::to_string(ir::kOnnxMaxOpset));
      c.opset = static_cast<int>(v);
    } else if (key == "name") {
      c.label = value;
    } else if (a == "persistent") {
      c.persistent = true;
    } else if (a == "forms") {
      c.forms = true;
    } else {
      break;
    }
  }
  if (i == args.size()) return c;
  const std::string program = resolve_program(args[i]);
  if (program.empty())
    throw core::UserError("exec: program '" + args[i] + "' is not an executable file" +
                          (args[i].find('/') == std::string::npos ? " on $PATH" : ""));
  c.argv.push_back(program);
  c.argv.insert(c.argv.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  return c;
}

ir::OnnxForm onnx_form(const Config& c, const ir::Graph& g) {
  return ir::OnnxForm{c.opset, c.forms ? ir::form_seed(g) : 0};
}

}  // namespace quorum::backends::exec
