// quorum export MODEL -o FILE.onnx [--opset N] [--form_seed S]: writes a model (JSON or ONNX) as an ONNX
// model, in the plain form or the exchange form seed S chooses (ir::OnnxForm).
#include <iostream>

#include "cli/options.h"
#include "core/error.h"
#include "core/fileio.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"

namespace quorum::cli {

using core::UserError;

int cmd_export(const Options& o) {
  if (o.positional.size() != 1)
    throw UserError("export: expected one MODEL file (quorum export MODEL.json --output model.onnx)");
  if (o.output.empty()) throw UserError("export: --output FILE.onnx is required");
  const std::string& out = o.output;
  if (out.size() < 5 || out.compare(out.size() - 5, 5, ".onnx") != 0)
    throw UserError("--output " + out + ": expected a file name ending in .onnx");
  if (o.opset < static_cast<uint64_t>(ir::kOnnxMinOpset) || o.opset > static_cast<uint64_t>(ir::kOnnxMaxOpset))
    throw UserError("--opset " + std::to_string(o.opset) + ": the exporter writes opsets " +
                    std::to_string(ir::kOnnxMinOpset) + " to " + std::to_string(ir::kOnnxMaxOpset));
  const ir::Graph g = ir::load_graph(o.positional[0]);
  const ir::OnnxExported x = ir::graph_to_onnx(g, ir::OnnxForm{static_cast<int>(o.opset), o.form_seed});
  core::write_file_atomic(out, x.bytes);
  std::cout << "wrote " << out << " (ONNX opset " << o.opset << ", " << g.nodes.size() << " nodes, "
            << x.bytes.size() << " bytes)\n";
  if (o.form_seed) std::cout << "forms: " << x.str() << "\n";
  return 0;
}

}  // namespace quorum::cli
