// OpenCV's reproducer: the model as model.onnx (what Quorum fed OpenCV's importer), its inputs and
// the expected float64 values as .npy, and repro.py running it through cv2.dnn (Debian
// python3-opencv) with the layers fetched as Quorum fetched them.
#include <algorithm>
#include <sstream>

#include "backends/opencv/opencv_support.h"
#include "backends/repro.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "ir/onnx_io.h"

namespace quorum::backends {

ReproProgram write_repro_opencv(const ReproCase& c, const std::string& dir) {
  if (c.train) throw ReproUnsupported("OpenCV DNN does not train; the finding is in stage " + c.stage);
  ReproProgram p;
  p.main = "repro.py";
  p.run = "/usr/bin/python3 repro.py";
  std::string onnx;
  try {
    onnx = ir::graph_to_onnx(c.model, opencv::kOpset);
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

  std::ostringstream py;
  py << "#!/usr/bin/python3\n" << repro_header(c, "#", "/usr/bin/python3 repro.py  (Debian python3-opencv, python3-numpy)");
  py << "import os\nimport sys\n\nimport cv2\nimport numpy as np\n\n";
  py << py_check_function() << "\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\n";
  py << "ATOL, RTOL = " << py_literal(c.tol.atol) << ", " << py_literal(c.tol.rtol) << "\n\n";
  py << "print('OpenCV', cv2.__version__)\n";
  py << "net = cv2.dnn.readNetFromONNX(os.path.join(HERE, 'model.onnx'))\n";
  py << "net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)\n";
  py << "net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)\n";
  for (const auto& in : c.model.inputs) {
    const std::string file = "input_" + identifier(in.name) + ".npy";
    core::write_npy(dir + "/" + file, c.inputs.at(in.name).to(core::DType::F32));
    p.files.push_back(file);
    py << "net.setInput(np.load(os.path.join(HERE, '" << file << "')), '" << in.name << "')\n";
  }
  // OpenCV names each layer after its ONNX node; Quorum fetched every node's output by that name.
  py << "layers = [";
  for (const auto& n : c.model.nodes) py << "'onnx_node!" << n.name << "', ";
  py << "]\nvalues = [";
  for (const auto& n : c.model.nodes) py << "'" << n.outputs[0] << "', ";
  py << "]\nblobs = dict(zip(values, net.forward(layers)))\n\nbad = 0\n";
  for (const auto& v : compared) {
    const std::string file = "expected_" + identifier(v) + ".npy";
    core::write_npy(dir + "/" + file, c.expected.at(v));
    p.files.push_back(file);
    py << "bad += quorum_check('" << v << "', blobs['" << v << "'], np.load(os.path.join(HERE, '" << file
       << "')), ATOL, RTOL)\n";
  }
  py << "sys.exit(1 if bad else 0)\n";
  write_repro_file(p, dir, p.main, py.str());
  return p;
}

}  // namespace quorum::backends
