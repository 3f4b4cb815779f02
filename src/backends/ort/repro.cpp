// ONNX Runtime's reproducer: the model as model.onnx (what Quorum gave ORT: the same seeded form and
// opset, every node output a graph output) and repro.js, a Node script on onnxruntime-node's own API
// with the session options of the finding's variant, the inputs and the float64 expected values
// embedded, fetching the values Quorum compared. package.json beside it pins the release Quorum ran,
// so `npm install && node repro.js` runs it anywhere; here it also finds Quorum's own install.
#include "backends/repro.h"

#include <algorithm>
#include <sstream>

#include "backends/exec/program_session.h"
#include "backends/ort/variant.h"
#include "ir/onnx_io.h"

namespace quorum::backends {

namespace {

std::string base64(const void* data, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* b = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const unsigned v = (b[i] << 16) | ((i + 1 < n ? b[i + 1] : 0) << 8) | (i + 2 < n ? b[i + 2] : 0);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += i + 2 < n ? k[v & 63] : '=';
  }
  return out;
}

// A JavaScript expression holding `t`'s elements as a typed array (bytes little-endian, as x86 and
// Node keep them), and the ORT element type that goes with it.
std::string js_array(const core::Tensor& t, std::string* ort_type = nullptr) {
  const char* array = "Float32Array";
  const char* type = "float32";
  const void* data = nullptr;
  size_t bytes = 0;
  switch (t.dtype()) {
    case core::DType::F32:
      data = t.f32();
      bytes = 4 * static_cast<size_t>(t.numel());
      break;
    case core::DType::F64:
      array = "Float64Array";
      type = "float64";
      data = t.f64();
      bytes = 8 * t.numel();
      break;
    case core::DType::I64:
      array = "BigInt64Array";
      type = "int64";
      data = t.i64();
      bytes = 8 * t.numel();
      break;
    case core::DType::I8:
    case core::DType::U8:
    case core::DType::I32:
      array = t.dtype() == core::DType::I8 ? "Int8Array" : t.dtype() == core::DType::U8 ? "Uint8Array" : "Int32Array";
      type = t.dtype() == core::DType::I8 ? "int8" : t.dtype() == core::DType::U8 ? "uint8" : "int32";
      data = t.raw();
      bytes = t.nbytes();
      break;
  }
  if (ort_type) *ort_type = type;
  return std::string("typed(") + array + ", '" + base64(data, bytes) + "')";
}

std::string js_dims(const core::Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace

ReproProgram write_repro_ort(const ReproCase& c, const std::string& dir) {
  if (c.train)
    throw ReproUnsupported("onnxruntime-node does not train; the finding is in stage " +
                           std::string(core::to_string(c.stage)));
  ort::Variant v = ort::parse_variant(spec_options(c.backend));
  // The optimized stage: as the optimized run made it, level 'all' with only the graph's outputs in the model.
  const bool optimized = c.stage == core::Stage::Optimized;
  if (optimized) v.level = "all";
  const ir::Graph model = exec::in_dtype(c.model, c.dtype);
  ReproProgram p;
  std::string onnx;
  try {
    ir::OnnxForm form = ort::onnx_form(model, v);
    form.outputs_only = optimized;
    onnx = ir::graph_to_onnx(model, form).bytes;
  } catch (const std::exception& e) {
    throw ReproUnsupported(std::string("Quorum's ONNX exporter failed: ") + e.what());
  }
  write_repro_file(p, dir, "model.onnx", onnx);
  write_repro_file(p, dir, "package.json",
                   std::string("{\n  \"name\": \"quorum-ort-repro\",\n  \"private\": true,\n  \"dependencies\": "
                               "{ \"onnxruntime-node\": \"") +
                       ort::kPinnedVersion + "\" }\n}\n");

  // Values compared: the blamed node's outputs and the graph outputs.
  std::vector<std::string> compared;
  auto add = [&](const std::string& value) {
    if (std::find(compared.begin(), compared.end(), value) == compared.end() && c.expected.count(value))
      compared.push_back(value);
  };
  if (const ir::Node* n = c.blamed())
    for (const auto& o : n->outputs) add(o);
  for (const auto& o : model.outputs) add(o);

  p.main = "repro.js";
  p.run = "node repro.js";
  const bool crash = c.crash();
  const std::string modules = ort::modules_dir(QUORUM_ORT_DIR);
  std::ostringstream js;
  js << "#!/usr/bin/env node\n"
     << repro_header(c, "//", p.run + "  (Node.js; `npm install` here first, or QUORUM_ORT_MODULES=<node_modules>)");
  js << "'use strict';\nconst path = require('path');\n\n";
  js << "// onnxruntime-node: installed beside this file, else $QUORUM_ORT_MODULES, else Quorum's install.\n";
  js << "function loadOrt() {\n  for (const from of [null, process.env.QUORUM_ORT_MODULES, " << quoted(modules)
     << "]) {\n    if (from === undefined || from === '') continue;\n"
     << "    try {\n      return require(from === null ? 'onnxruntime-node' : path.join(from, 'onnxruntime-node'));\n"
     << "    } catch (e) {}\n  }\n  console.log('onnxruntime-node is not installed: run `npm install` here');\n"
     << "  process.exit(2);\n}\nconst ort = loadOrt();\n\n";
  js << "function typed(Type, b64) {\n  const b = Buffer.from(b64, 'base64');\n"
     << "  return new Type(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));\n}\n\n";
  js << js_check_function() << "\n";
  js.precision(17);
  js << "const ATOL = " << c.tol.atol << ", RTOL = " << c.tol.rtol << ";\n\n";
  js << "(async () => {\n";
  js << "  console.log('ONNX Runtime', ort.env.versions ? ort.env.versions.common : '(version unknown)');\n";
  js << "  // As the finding's backend (" << c.backend << ").\n";
  js << "  const options = {graphOptimizationLevel: " << quoted(v.level)
     << ", intraOpNumThreads: " << (v.threads > 0 ? v.threads : 1)
     << ", interOpNumThreads: 1, enableCpuMemArena: " << (v.arena ? "true" : "false")
     << ", executionMode: " << (v.parallel ? "'parallel'" : "'sequential'") << "};\n";
  js << "  let results;\n  try {\n";
  js << "    const session = await ort.InferenceSession.create(path.join(__dirname, 'model.onnx'), options);\n";
  js << "    const feeds = {};\n";
  for (const auto& in : model.inputs) {
    std::string type;
    const std::string data = js_array(c.inputs.at(in.name).to(in.type.dtype), &type);
    js << "    feeds[" << quoted(in.name) << "] = new ort.Tensor(" << quoted(type) << ", " << data << ", "
       << js_dims(in.type.shape) << ");\n";
  }
  js << "    results = await session.run(feeds, [";
  for (size_t i = 0; i < compared.size(); ++i) js << (i ? ", " : "") << quoted(compared[i]);
  js << "]);\n  } catch (e) {\n    console.log('ONNX Runtime failed:', e.message);\n    process.exit("
     << (crash ? 1 : 2) << ");\n  }\n  let bad = 0;\n";
  for (const auto& value : compared)
    js << "  bad += quorumCheck(" << quoted(value) << ", results[" << quoted(value) << "].data, "
       << js_array(c.expected.at(value).to(core::DType::F64)) << ", ATOL, RTOL);\n";
  js << "  process.exit(bad ? 1 : 0);\n})();\n";
  write_repro_file(p, dir, p.main, js.str());
  return p;
}

}  // namespace quorum::backends
