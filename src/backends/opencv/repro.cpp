// OpenCV's reproducer: the model as model.onnx (what Quorum fed OpenCV's importer) and a program
// running it through OpenCV DNN with the layers fetched as Quorum fetched them: repro.py with cv2.dnn
// (Debian python3-opencv), or repro.cpp when a graph input has rank 3 (cv2 turns a 3-D NumPy array
// into a 2-D multi-channel Mat, so Python cannot feed OpenCV the blob Quorum fed it).
#include <algorithm>
#include <sstream>

#include "backends/opencv/opencv_support.h"
#include "backends/opencv/quantizer_names.h"
#include "backends/repro.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "ir/onnx_io.h"

namespace quorum::backends {

namespace {

// The thread count the finding's backend ran with: its threads=N option (execution variant), else 1.
int threads_of(const ReproCase& c) {
  const int n = opencv::parse_variant(spec_options(c.backend)).threads;
  return n > 0 ? n : 1;
}

void python_program(const ReproCase& c, const std::string& dir, const std::vector<std::string>& compared,
                    ReproProgram& p) {
  p.main = "repro.py";
  p.run = "/usr/bin/python3 repro.py";
  const bool crash = c.crash();
  std::ostringstream py;
  py << "#!/usr/bin/python3\n" << repro_header(c, "#", p.run + "  (Debian python3-opencv, python3-numpy)");
  py << "import os\nimport sys\n\nimport cv2\nimport numpy as np\n\n";
  py << py_check_function() << "\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\n";
  py << "ATOL, RTOL = " << py_literal(c.tol.atol) << ", " << py_literal(c.tol.rtol) << "\n\n";
  py << "print('OpenCV', cv2.__version__)\n";
  py << "cv2.setNumThreads(" << threads_of(c) << ")  # as the finding's backend (" << c.backend << ")\n";
  const bool optimized = c.stage == core::Stage::Optimized;
  // The optimized stage: only the graph's outputs are requested, so OpenCV fuses layers (fuseLayers) as an
  // application's net.forward() does; the same model with every layer requested (fusion blocked, as Quorum's
  // pinned run) is printed beside it.
  std::vector<const ir::Node*> fetched;
  for (const auto& n : c.model.nodes)
    if (!optimized || std::find(c.model.outputs.begin(), c.model.outputs.end(), n.outputs[0]) != c.model.outputs.end())
      fetched.push_back(&n);
  py << "def run(fetched):\n";
  py << "    net = cv2.dnn.readNetFromONNX(os.path.join(HERE, 'model.onnx'))\n";
  py << "    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)\n";
  py << "    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)\n";
  for (const auto& in : c.model.inputs) {
    const std::string file = "input_" + identifier(in.name) + ".npy";
    core::write_npy(dir + "/" + file, c.inputs.at(in.name).to(core::DType::F32));
    p.files.push_back(file);
    py << "    net.setInput(np.load(os.path.join(HERE, " << quoted(file) << ")), " << quoted(in.name) << ")\n";
  }
  // OpenCV names each layer after its ONNX node; Quorum fetched every node's output by that name.
  py << "    return dict(zip(fetched.values(), net.forward(list(fetched.keys()))))\n\n";
  py << "try:\n    blobs = run({";
  for (const ir::Node* n : fetched) py << quoted("onnx_node!" + n->name) << ": " << quoted(n->outputs[0]) << ", ";
  py << "})\n";
  if (optimized) {
    py << "    pinned = run({";
    for (const auto& n : c.model.nodes) py << quoted("onnx_node!" + n.name) << ": " << quoted(n.outputs[0]) << ", ";
    py << "})\n";
  }
  py << "except cv2.error as e:\n    print('OpenCV failed:', e)\n    sys.exit(" << (crash ? 1 : 2) << ")\n\nbad = 0\n";
  for (const auto& v : compared) {
    const std::string file = "expected_" + identifier(v) + ".npy";
    core::write_npy(dir + "/" + file, c.expected.at(v));
    p.files.push_back(file);
    if (optimized)
      py << "print('every layer requested (no fusion):')\nquorum_check(" << quoted(v) << ", pinned[" << quoted(v)
         << "], np.load(os.path.join(HERE, " << quoted(file) << ")), ATOL, RTOL)\nprint('only the outputs "
         << "requested (OpenCV fuses):')\n";
    // OpenCV holds a uint8 value as int8 shifted by 128 (its importer moves uint8 tensors into int8).
    const bool u8 = c.model.types.count(v) && c.model.types.at(v).dtype == core::DType::U8;
    const std::string got = u8 ? "(blobs[" + quoted(v) + "].astype(np.float64) + 128)" : "blobs[" + quoted(v) + "]";
    py << "bad += quorum_check(" << quoted(v) << ", " << got << ", np.load(os.path.join(HERE, " << quoted(file)
       << ")), ATOL, RTOL)\n";
  }
  py << "sys.exit(1 if bad else 0)\n";
  write_repro_file(p, dir, p.main, py.str());
}

void cpp_program(const ReproCase& c, const std::vector<std::string>& compared, const std::string& dir,
                 ReproProgram& p) {
  p.main = "repro.cpp";
  p.run = "g++ -std=c++17 -O1 repro.cpp -o repro -I/usr/include/opencv4 -lopencv_dnn -lopencv_core && ./repro";
  const bool crash = c.crash();
  std::ostringstream s;
  s << repro_header(c, "//", p.run + "  (Debian libopencv-dev)");
  s << "// C++ rather than Python: a graph input has rank 3, which cv2 would read as a 2-D image with channels.\n";
  s << "#include <opencv2/core.hpp>\n#include <opencv2/dnn.hpp>\n\n#include <cmath>\n#include <cstdio>\n#include "
       "<string>\n#include <vector>\n\n";
  s << cpp_check_function() << "\n";
  int k = 0;
  for (const auto& in : c.model.inputs) s << c_array("input_" + std::to_string(k++), c.inputs.at(in.name));
  k = 0;
  for (const auto& v : compared) s << c_array("expected_" + std::to_string(k++), c.expected.at(v), false);
  s << "\nint main() {\n  std::printf(\"OpenCV %s\\n\", cv::getVersionString().c_str());\n";
  s << "  cv::setNumThreads(" << threads_of(c) << ");  // as the finding's backend (" << c.backend << ")\n";
  s << "  std::vector<cv::Mat> blobs;\n  try {\n";
  s << "    cv::dnn::Net net = cv::dnn::readNetFromONNX(\"model.onnx\");\n";
  s << "    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);\n    "
       "net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);\n";
  k = 0;
  for (const auto& in : c.model.inputs) {
    std::vector<int64_t> dims(in.type.shape.begin(), in.type.shape.end());
    if (dims.empty()) dims.push_back(1);
    s << "    {\n      const int dims[] = {";
    for (size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
    s << "};\n      cv::Mat m(" << dims.size() << ", dims, CV_32F, const_cast<float*>(input_" << k++ << "));\n";
    s << "      net.setInput(m.clone(), " << quoted(in.name) << ");\n    }\n";
  }
  s << "    // OpenCV names each layer after its ONNX node; Quorum fetched every node's output by that name.\n";
  // The optimized stage: only the graph's outputs are requested, so OpenCV fuses layers as an application's
  // forward does.
  std::vector<const ir::Node*> fetched;
  for (const auto& n : c.model.nodes)
    if (c.stage != core::Stage::Optimized ||
        std::find(c.model.outputs.begin(), c.model.outputs.end(), n.outputs[0]) != c.model.outputs.end())
      fetched.push_back(&n);
  s << "    const std::vector<cv::String> layers = {";
  for (const ir::Node* n : fetched) s << quoted("onnx_node!" + n->name) << ", ";
  s << "};\n    net.forward(blobs, layers);\n";
  s << "  } catch (const cv::Exception& e) {\n    std::printf(\"OpenCV failed: %s\\n\", e.what());\n    return "
    << (crash ? 1 : 2) << ";\n  }\n  int bad = 0;\n";
  k = 0;
  for (const auto& v : compared) {
    size_t layer = 0;
    for (size_t i = 0; i < fetched.size(); ++i)
      if (fetched[i]->outputs[0] == v) layer = i;
    const int64_t n = c.expected.at(v).numel();
    s << "  {\n    const cv::Mat b = blobs[" << layer << "].isContinuous() ? blobs[" << layer << "] : blobs[" << layer
      << "].clone();\n";
    s << "    if ((long long)b.total() != " << n << "LL) {\n      std::printf(\"" << v
      << ": OpenCV returned %zu elements, expected " << n << "\\n\", b.total());\n      ++bad;\n    } else {\n";
    s << "      bad += quorum_check(" << quoted(v) << ", b.ptr<float>(), expected_" << k++ << ", " << n << ", "
      << c_literal(c.tol.atol, false) << ", " << c_literal(c.tol.rtol, false) << ");\n    }\n  }\n";
  }
  s << "  return bad ? 1 : 0;\n}\n";
  write_repro_file(p, dir, p.main, s.str());
}

}  // namespace

ReproProgram write_repro_opencv(const ReproCase& c, const std::string& dir) {
  if (c.train)
    throw ReproUnsupported("OpenCV DNN does not train; the finding is in stage " +
                           std::string(core::to_string(c.stage)));
  for (const auto& n : c.model.nodes)
    if (n.outputs.size() != 1)
      throw ReproUnsupported("node '" + n.name +
                             "' has several outputs; OpenCV layers are fetched by node name, one output each");
  ReproProgram p;
  std::string onnx;
  try {
    ir::OnnxForm form = opencv::onnx_form(c.model, opencv::parse_variant(spec_options(c.backend)));
    form.outputs_only = c.stage == core::Stage::Optimized;  // as the optimized run wrote it
    std::map<std::string, std::string> back;
    onnx = opencv::dequantized_names(ir::graph_to_onnx(opencv::quantizer_names(c.model, back), form).bytes);
  } catch (const std::exception& e) {
    throw ReproUnsupported(std::string("Quorum's ONNX exporter failed: ") + e.what());
  }
  write_repro_file(p, dir, "model.onnx", onnx);

  // Values compared: the blamed node's outputs and the graph outputs.
  std::vector<std::string> compared;
  auto add = [&](const std::string& v) {
    if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v)) compared.push_back(v);
  };
  if (const ir::Node* n = c.blamed())
    for (const auto& o : n->outputs) add(o);
  for (const auto& o : c.model.outputs) add(o);

  const bool rank3 = std::any_of(c.model.inputs.begin(), c.model.inputs.end(),
                                 [](const ir::ValueInfo& in) { return in.type.shape.size() == 3; });
  if (rank3) cpp_program(c, compared, dir, p);
  else python_program(c, dir, compared, p);
  return p;
}

}  // namespace quorum::backends
