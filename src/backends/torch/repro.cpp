// libtorch's reproducer: repro.py, a PyTorch Python program (Debian python3-torch 1.13, the same
// library as Quorum's libtorch backend) that builds the finding's model node by node with the
// torch / torch.nn.functional calls Quorum's backend makes, with the inputs, weights, training
// target and expected values as .npy files beside it. The calls come from the one lowering the
// backend runs (lower.h): PythonSink prints each statement as Python, and the node's refusal is the
// backend's support check. This file holds the program's skeleton around them.
//
// The model is a Python function model(dtype, train) run twice: in the finding's dtype (float32)
// and in float64, the baseline PyTorch's bug template asks for. Every value is compared with
// Quorum's float64 reference (what the oracle judged; it decides the exit status, because some
// libtorch defects are in the float64 kernels too) and with torch's own float64 run (printed for
// the maintainer). Training findings (BC, LC) run one autograd step: inputs and weights are leaf
// tensors, node outputs retain their gradients, the catalogue loss of graph output 0 against the
// target is back-propagated, and the gradients of the blamed node's inputs and weights are
// compared. When Quorum cut a node out of a larger unreduced model for the case, a backward
// finding runs that whole model instead: the layout of the incoming gradient (a following
// transpose makes it non-contiguous) is part of some libtorch bugs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "backends/repro.h"
#include "backends/torch/lower.h"
#include "backends/torch/variant.h"
#include "core/npy.h"

namespace quorum::backends {

namespace {

using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

// ---- Python literals -------------------------------------------------------------------------------

// A float literal that stays a float in Python (2.0, not 2: torch picks kernels by Scalar kind).
std::string pf(double v) {
  std::string s = py_literal(v);
  for (int prec = 1; prec < 17 && std::isfinite(v); ++prec) {  // the shortest form that reads back exactly
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) {
      s = buf;
      break;
    }
  }
  if (s.find_first_of(".eEn(") == std::string::npos) s += ".0";
  return s;
}

// A constant of the mapping as it is written by hand (20.0, not pf's shortest 2e+01).
std::string decimal(double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::abs(v) >= 1e15) return pf(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string pi(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string ps(const std::string& v) {
  std::string s = "'";
  for (char ch : v) {
    if (ch == '\'' || ch == '\\') s += '\\';
    s += ch;
  }
  return s + "'";
}

std::string pb(bool b) { return b ? "True" : "False"; }

// ---- helpers the generated program may need ---------------------------------------------------------

const std::map<std::string, std::string>& helper_source() {
  static const std::map<std::string, std::string> h = {
      {"crop_to", R"PY(def crop_to(y, shape):
    """Crops the spatial axes (from 2) to `shape`: ATen keeps ceil-mode windows starting in explicitly
    added right padding, ONNX drops them (Quorum's backend does the same crop)."""
    for d in range(2, y.dim()):
        if y.size(d) > shape[d]:
            y = y.narrow(d, 0, shape[d])
    return y
)PY"},
      {"catalogue_loss", R"PY(def catalogue_loss(name, p, t):
    """Quorum's catalogue losses as its torch backend computes them (catalogue_loss in torch_sink.cpp)."""
    if name == 'mse_loss':
        return F.mse_loss(p, t, reduction='mean')
    if name == 'binary_cross_entropy':
        return F.binary_cross_entropy(p, t, reduction='mean')
    if name == 'softmax_cross_entropy':  # class-probability targets [N, C]
        return F.cross_entropy(p, t, reduction='mean')
    if name == 'categorical_hinge':  # Keras: mean of max(0, max((1-t)*p) - sum(t*p) + 1)
        def scaled(c, x):  # a zero coefficient's term absent, not 0 * inf = NaN
            return torch.where(torch.eq(c, 0), torch.zeros_like(x), torch.mul(c, x))
        pos = torch.sum(scaled(t, p), [1])
        neg = torch.max(scaled(torch.rsub(t, 1.0), p), 1).values  # the first of tied maxima gets the gradient
        return torch.mean(torch.relu(torch.add(torch.sub(neg, pos), 1.0)))
    raise ValueError('unknown loss ' + name)
)PY"},
  };
  return h;
}

// ---- the per-node code: the lowering's statements printed as Python ------------------------------

// The writer's sink: each statement of the lowering (lower.h) as a line of PyTorch Python, calls
// spelled as the lowering names them ("torch.add(x0, 1.0)", "x0.clone()", "F.conv2d(..., stride=[1, 1])").
class PythonSink : public torch::Sink {
 public:
  PythonSink(Lines& lines, std::set<std::string>& helpers) : lines_(lines), helpers_(helpers) {}

  void assign(const std::vector<std::string>& outs, const torch::CallPtr& e, const std::string& note) override {
    std::string l;
    for (size_t i = 0; i < outs.size(); ++i) l += (i ? ", " : "") + outs[i];
    lines_.push_back(indent_ + l + " = " + expr(*e) + (note.empty() ? "" : "  # " + note));
  }
  void begin_if_requires_grad(const std::vector<std::string>& vars) override {
    std::string l = "if ";
    for (size_t i = 0; i < vars.size(); ++i) l += (i ? " or " : "") + vars[i] + ".requires_grad";
    lines_.push_back(indent_ + l + ":");
    indent_ += "    ";
  }
  void end_if() override { indent_.resize(indent_.size() - 4); }
  void comment(const std::string& text) override { lines_.push_back(indent_ + "# " + text); }

 private:
  std::string expr(const torch::Call& c) {
    if (c.fn.empty()) return c.var;
    if (c.fn == "crop_to" || c.fn == "catalogue_loss") helpers_.insert(c.fn);
    if (c.fn == "slice") {  // (x, axis, start, end, step) as x[:, start:end:step]
      std::string idx;
      for (int64_t k = 0; k < c.args.at(1).i; ++k) idx += ":, ";
      idx += arg(c.args.at(2)) + ":" + arg(c.args.at(3)) + ":" + arg(c.args.at(4));
      return expr(*c.args.at(0).t) + "[" + idx + "]";
    }
    const bool method = c.fn[0] == '.';  // a method of the first argument
    std::string s = method ? expr(*c.args.at(0).t) + c.fn + "(" : c.fn + "(";
    for (size_t i = method ? 1 : 0, first = i; i < c.args.size(); ++i) s += (i > first ? ", " : "") + arg(c.args[i]);
    return s + ")";
  }

  std::string arg(const torch::Arg& a) {
    using K = torch::Arg::Kind;
    const std::string k = a.keyword.empty() ? "" : a.keyword + "=";
    switch (a.kind) {
      case K::Tensor: return k + expr(*a.t);
      case K::Tensors: {
        std::string s = "[";
        for (size_t i = 0; i < a.ts.size(); ++i) s += (i ? ", " : "") + expr(*a.ts[i]);
        return k + s + "]";
      }
      case K::Int: return k + std::to_string(a.i);
      case K::Ints: return k + pi(a.ints);
      case K::Float: return k + (a.literal ? decimal(a.f) : pf(a.f));
      case K::Floats: {
        std::string s = "(";
        for (size_t i = 0; i < a.fs.size(); ++i) s += (i ? ", " : "") + pf(a.fs[i]);
        return k + s + (a.fs.size() == 1 ? ",)" : ")");
      }
      case K::Bool: return k + pb(a.b);
      case K::Str: return k + ps(a.s);
      case K::None: return k + "None";
      case K::DTypeOf: return k + expr(*a.t) + ".dtype";
      case K::SizeMinus: return k + expr(*a.t) + ".size(" + std::to_string(a.i) + ") - " + std::to_string(a.minus);
      case K::DType: return k + "torch." + a.s;
    }
    return k;
  }

  Lines& lines_;
  std::set<std::string>& helpers_;
  std::string indent_;
};

// Python statements computing `y` from the node's inputs x0, x1, ... (data inputs then weights).
// The node's support check and its refusal reason are the backend's own (torch::support).
Lines node_lines(const ir::Graph& g, const ir::Node& n, const std::string& qengine, std::set<std::string>& helpers) {
  const Support s = torch::support(g, n, qengine);
  if (!s.ok) throw ReproUnsupported(s.reason + "; Quorum's torch backend refuses it too");
  Lines lines;
  PythonSink sink(lines, helpers);
  try {
    torch::lower_node(g, n, sink);
  } catch (const torch::LoweringError& e) {
    throw ReproUnsupported(e.what());
  }
  return lines;
}

// The graph to run and its inputs: the case's model, except for a training finding whose node
// Quorum cut out of a larger unreduced model (then the whole model, from the bundle).
struct Plan {
  ir::Graph g;
  ValueMap inputs;
  bool whole_model = false;  // the bundle's full model replaces the one-node cut
  bool feed_incoming = false;  // one-node cut without its model: backward fed the recorded gradient
};

Plan plan_case(const ReproCase& c) {
  Plan p{c.model, c.inputs};
  if (!c.train || c.whole_model.nodes.empty()) return p;
  if (c.target.defined() && c.target.shape() == c.whole_model.types.at(c.whole_model.outputs.at(0)).shape) {
    p.g = c.whole_model;
    p.inputs = c.whole_inputs;
    p.whole_model = true;
  } else {
    p.feed_incoming = !c.incoming.empty();
  }
  return p;
}

// A value in the case's dtype; a quantized model's integer values as they are.
core::Tensor in_dtype(const core::Tensor& t, core::DType dtype) { return core::is_float(t.dtype()) ? t.to(dtype) : t; }

bool has_quantized_values(const ir::Graph& g) {
  return std::any_of(g.types.begin(), g.types.end(),
                     [](const auto& kv) { return core::is_quantized(kv.second.dtype); });
}

std::string npy(ReproProgram& p, const std::string& dir, const std::string& file, const core::Tensor& t) {
  core::write_npy(dir + "/" + file, t);
  p.files.push_back(file);
  return file;
}

}  // namespace

ReproProgram write_repro_torch(const ReproCase& c, const std::string& dir) {
  if (c.dtype != core::DType::F32 && c.dtype != core::DType::F64)
    throw ReproUnsupported("the torch backend computes in float32 or float64, the case is " + core::to_string(c.dtype));
  if (c.train && !c.loss_attrs.empty()) throw ReproUnsupported("the torch backend's losses take no attributes");
  const bool crash = c.crash() || c.stage == core::Stage::Compile;
  const Plan plan = plan_case(c);
  const ir::Graph& g = plan.g;
  const std::set<std::string> multi = multi_consumer_values(g);
  const ir::Node* blamed = g.find_node(c.node);
  const torch::Variant variant = torch::parse_variant(spec_options(c.backend));
  const bool quantized = has_quantized_values(g);

  // The model's code (throws ReproUnsupported before anything is written).
  std::set<std::string> helpers;
  std::ostringstream body;
  for (const auto& n : g.nodes) {
    if (n.outputs.size() != 1) throw ReproUnsupported("node '" + n.name + "' has several outputs");
    body << "    # node '" << n.name << "': " << n.op << " " << core::to_string(n.attrs) << "\n";
    body << "    ";
    for (size_t i = 0; i < n.inputs.size(); ++i) body << (i ? ", " : "") << "x" << i;
    body << " = ";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      body << (i ? ", " : "") << "use(" << ps(n.inputs[i]) << ", " << ps(n.name) << ")";
    body << "\n";
    for (const auto& line : node_lines(g, n, variant.qengine, helpers)) body << "    " << line << "\n";
    body << "    put(" << ps(n.outputs[0]) << ", y";
    for (size_t i = 0; i < n.inputs.size(); ++i) body << ", x" << i;
    body << ")\n";
  }
  if (c.train) helpers.insert("catalogue_loss");

  ReproProgram p;
  p.main = "repro.py";
  p.run = "/usr/bin/python3 repro.py";
  const bool single = c.dtype == core::DType::F32;
  const std::string lib_dtype = single ? "torch.float32" : "torch.float64";
  const std::string lib_name = single ? "float32" : "float64";

  std::ostringstream py;
  py << "#!/usr/bin/python3\n"
     << repro_header(c, "#", "/usr/bin/python3 repro.py  (Debian python3-torch 1.13, python3-numpy)");
  py << "#\n# The model is built with the torch / torch.nn.functional calls Quorum's libtorch backend makes\n"
        "# (src/backends/torch/lower.cpp) and run twice: in "
     << lib_name << " (the finding) and in float64\n"
        "# (PyTorch's own baseline). Two references are compared:\n"
        "#   - Quorum's float64 reference (expected_*.npy): what Quorum's oracle judged; it DECIDES the exit\n"
        "#     status, because some libtorch defects are in the float64 kernels as well;\n"
        "#   - torch's own float64 run of the same model: printed for information.\n";
  if (plan.whole_model)
    py << "# Quorum judged node '" << c.node << "' on its own; this program runs the whole model of the finding\n"
          "# so that the gradient reaching the node keeps the layout autograd gives it.\n";
  py << "import os\nimport sys\n\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n\n";
  py << py_check_function() << "\n\n";
  for (const auto& h : helpers) py << helper_source().at(h) << "\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\n\n\n"
        "def load(name):\n    return np.load(os.path.join(HERE, name))\n\n\n";
  py << "ATOL, RTOL = " << pf(c.tol.atol) << ", " << pf(c.tol.rtol) << "  # Quorum's tolerance for node '" << c.node
     << "'\n";
  py << "LIB_DTYPE, LIB_NAME = " << lib_dtype << ", '" << lib_name << "'  # the dtype of the finding\n";
  py << "INPUTS = {";
  for (const auto& in : g.inputs)
    py << "\n    " << ps(in.name) << ": load('"
       << npy(p, dir, "input_" + identifier(in.name) + ".npy", in_dtype(plan.inputs.at(in.name), c.dtype)) << "'),";
  py << "\n}\nWEIGHTS = {";
  for (const auto& [name, w] : g.initializers)
    py << "\n    " << ps(name) << ": load('" << npy(p, dir, "weight_" + identifier(name) + ".npy", in_dtype(w, c.dtype))
       << "'),";
  py << "\n}\n";
  py << "MULTI = " << (multi.empty() ? "set(" : "{");
  for (const auto& v : multi) py << ps(v) << ", ";
  py << (multi.empty() ? ")" : "}")
     << "  # values several nodes consume: each consumer's gradient share is kept apart (as Quorum does)\n\n\n";

  // The finding's execution variant (backend options): the same layout of inputs and weights.
  py << "def layout(t):\n    \"\"\"Inputs and weights as the finding's backend (" << c.backend
     << ") laid them out.\"\"\"\n";
  if (variant.channels_last)
    py << "    if t.dim() in (4, 5):\n        t = t.contiguous(memory_format=torch.channels_last if t.dim() == 4 "
          "else torch.channels_last_3d)\n";
  if (variant.strided)
    py << "    if t.dim() >= 1 and t.numel() > 0:  # a non-contiguous view: every other element of a wider buffer\n"
          "        big = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)\n"
          "        big[..., ::2].copy_(t)\n        t = big[..., ::2]\n";
  py << "    return t\n\n\n";
  py << R"PY(def model(dtype, train):
    """Runs the model in `dtype`. Returns every value by name (V) and, when training, the
    per-consumer views of shared values as (value@consumer, view) pairs (E)."""
    V, E = {}, []

    def use(name, consumer):
        t = V[name]
        if train and name in MULTI and t.requires_grad:
            t = t.view_as(t)
            t.retain_grad()
            E.append((name + '@' + consumer, t))
        return t

    def put(name, y, *ins):
        if train:
            # A node output is its own autograd node (not an alias of its input) and keeps its gradient.
            if y.is_leaf or any(y is x for x in ins):
                y = y.view_as(y)
            if y.requires_grad:
                y.retain_grad()
        V[name] = y

    for name, a in list(INPUTS.items()) + list(WEIGHTS.items()):
        t = torch.from_numpy(a)  # a quantized model's integer values keep their type
        V[name] = layout(t.to(dtype) if t.is_floating_point() else t).requires_grad_(train)
)PY";
  py << body.str() << "    return V, E\n\n\n";

  py << "print('PyTorch', torch.__version__, '| oneDNN (mkldnn) enabled:', torch.backends.mkldnn.is_available())\n";
  if (variant.threads > 0)
    py << "torch.set_num_threads(" << variant.threads << ")  # the finding's variant (" << c.backend << ")\n\n\n";
  else
    py << "torch.set_num_threads(1)  # Quorum's torch backend runs single-threaded\n\n\n";
  if (quantized)
    py << "torch.backends.quantized.engine = " << ps(variant.qengine) << "  # the quantized engine of " << c.backend
       << "\n\n\n";

  if (crash) {
    py << "# The finding is a crash while building or running the model: running it shows it.\n";
    if (c.train) {
      py << "V, E = model(LIB_DTYPE, True)\n"
         << "loss = catalogue_loss(" << ps(c.loss) << ", V[" << ps(g.outputs.at(0)) << "], torch.from_numpy(load('"
         << npy(p, dir, "target.npy", c.target.to(c.dtype)) << "')).to(LIB_DTYPE))\nloss.backward()\n";
    } else {
      py << "with torch.no_grad():\n    V, E = model(LIB_DTYPE, False)\n";
    }
    py << "print('the model ran without crashing')\nsys.exit(0)\n";
    write_repro_file(p, dir, p.main, py.str());
    return p;
  }

  if (quantized)  // integers: no float64 run to compare with
    py << R"PY(def compare(what, got, torch64, quorum64):
    """Checks one value; returns the number of elements beyond the tolerance against Quorum's reference."""
    print(f'--- {what}')
    return quorum_check(f'{what}, libtorch quantized vs Quorum float64 reference [decides]', got.numpy(), quorum64,
                        ATOL, RTOL)


)PY";
  else
    py << R"PY(def compare(what, got, torch64, quorum64):
    """Checks one value; returns the number of elements beyond the tolerance against Quorum's reference."""
    got, torch64 = got.detach().numpy(), torch64.detach().numpy()
    print(f'--- {what}')
    bad = quorum_check(f'{what}, {LIB_NAME} vs Quorum float64 reference [decides]', got, quorum64, ATOL, RTOL)
    quorum_check(f'{what}, {LIB_NAME} vs torch float64 [information]', got, torch64, ATOL, RTOL)
    also = quorum_check(f'{what}, torch float64 vs Quorum float64 reference [information]', torch64, quorum64, ATOL, RTOL)
    if bad and also:
        print(f'  => torch float64 differs from the reference too: the defect is not specific to {LIB_NAME}')
    elif bad:
        print(f'  => torch float64 agrees with the reference: the {LIB_NAME} computation is at fault')
    return bad


)PY";
  py << "bad = 0\n";

  if (!c.train) {
    std::vector<std::string> compared;
    auto add = [&](const std::string& v) {
      if (std::find(compared.begin(), compared.end(), v) == compared.end() && c.expected.count(v))
        compared.push_back(v);
    };
    if (blamed)
      for (const auto& o : blamed->outputs) add(o);
    for (const auto& o : g.outputs) add(o);
    if (compared.empty()) throw ReproUnsupported("the case holds no expected value for the blamed node or the outputs");
    py << "with torch.no_grad():\n    V32, _ = model(LIB_DTYPE, False)\n";
    if (quantized)
      py << "    V64 = V32  # no float64 run: libtorch quantizes float32 values only\n";
    else
      py << "    V64, _ = model(torch.float64, False)\n";
    for (const auto& v : compared)
      py << "bad += compare(\"value '" << v << "'\", V32[" << ps(v) << "], V64[" << ps(v) << "], load('"
         << npy(p, dir, "expected_" + identifier(v) + ".npy", c.expected.at(v)) << "'))\n";
  } else {
    const std::string out0 = g.outputs.at(0);
    py << "TARGET = load('" << npy(p, dir, "target.npy", c.target.to(c.dtype)) << "')\n";
    py << "LOSS = " << ps(c.loss) << "  # Quorum's training objective: catalogue loss of output '" << out0
       << "' vs TARGET\n";
    if (plan.feed_incoming) {
      const std::string o = blamed->outputs.at(0);
      py << "# Quorum judged this node on the gradient libtorch sent back to it in the finding's model:\n"
            "# that gradient is fed to backward directly.\n"
         << "INCOMING = load('" << npy(p, dir, "incoming_" + identifier(o) + ".npy", c.incoming.at(o).to(c.dtype))
         << "')\n";
    }
    py << "\n\ndef train_step(dtype):\n"
          "    \"\"\"One autograd step; returns every value, every gradient (by value, and by value@consumer\n"
          "    for shared values) and the loss.\"\"\"\n"
          "    V, E = model(dtype, True)\n";
    if (plan.feed_incoming)
      py << "    loss = torch.zeros([], dtype=dtype)\n"
         << "    V[" << ps(blamed->outputs.at(0)) << "].backward(torch.from_numpy(INCOMING).to(dtype))\n";
    else
      py << "    loss = catalogue_loss(LOSS, V[" << ps(out0) << "], torch.from_numpy(TARGET).to(dtype))\n"
         << "    if loss.requires_grad:\n        loss.backward()\n";
    py << "    G = {name: t.grad if t.grad is not None else torch.zeros_like(t) for name, t in V.items()}\n"
          "    for key, t in E:\n"
          "        g = t.grad if t.grad is not None else torch.zeros_like(t)\n"
          "        G[key] = G[key] + g if key in G else g\n"
          "    return V, G, loss\n\n\n"
          "V32, G32, loss32 = train_step(LIB_DTYPE)\n"
          "V64, G64, loss64 = train_step(torch.float64)\n";
    if (!plan.feed_incoming)
      py << "print(f'loss ({LOSS}): " << lib_name << " {loss32.item():.9g}, torch float64 {loss64.item():.9g}')\n";
    if (c.stage == core::Stage::Loss || !blamed) {
      if (!c.expected_grads.count(out0)) throw ReproUnsupported("the case holds no expected loss gradient");
      py << "bad += compare(\"loss gradient d loss / d '" << out0 << "'\", G32[" << ps(out0) << "], G64[" << ps(out0)
         << "], load('" << npy(p, dir, "expected_grad_" + identifier(out0) + ".npy", c.expected_grads.at(out0))
         << "'))\n";
    } else {
      if (!plan.feed_incoming)
        for (const auto& o : blamed->outputs)
          if (c.incoming.count(o))
            py << "print('incoming gradient of node " << c.node
               << " (what autograd sends back to it), compared with what Quorum recorded from libtorch:')\n"
               << "if quorum_check(\"d loss / d '" << o << "' [information]\", G32[" << ps(o) << "].numpy(), load('"
               << npy(p, dir, "incoming_" + identifier(o) + ".npy", c.incoming.at(o)) << "'), ATOL, RTOL):\n"
               << "    print('  WARNING: Quorum computed the reference gradients below from the recorded incoming "
                  "gradient;'\n"
                  "          ' with a different one they do not apply')\n";
      // Quorum's float64 gradient per input/weight of the node: the vector-Jacobian product on the
      // library's own operands and incoming gradient (what the oracle judged) when the case has it,
      // else the float64 reference's gradient of the case's model.
      const bool node_level = !c.node_grads.empty();
      if (!node_level && plan.whole_model)
        throw ReproUnsupported("the case holds no float64 gradient of the blamed node");
      int n_compared = 0;
      std::set<std::string> seen;
      for (const auto& in : blamed->inputs) {
        if (!seen.insert(in).second) continue;
        const std::string key = multi.count(in) ? ir::contribution_key(in, blamed->name) : in;
        const core::Tensor* want = nullptr;
        if (node_level) {
          if (auto it = c.node_grads.find(in); it != c.node_grads.end()) want = &it->second;
        } else if (auto it = c.expected_grads.find(key); it != c.expected_grads.end()) {
          want = &it->second;
        }
        if (!want) continue;
        ++n_compared;
        py << "bad += compare(\"gradient of '" << in << "' from node '" << blamed->name << "'"
           << (key != in ? " (this consumer's share)" : "") << "\", G32[" << ps(key) << "], G64[" << ps(key)
           << "], load('" << npy(p, dir, "expected_grad_" + identifier(key) + ".npy", *want) << "'))\n";
      }
      if (!n_compared)
        throw ReproUnsupported("the case holds no expected gradient for the inputs of node '" + c.node + "'");
      if (node_level)
        py << "print(\"(Quorum's reference gradients: the float64 vector-Jacobian product of node '" << c.node
           << "' on the operands and incoming gradient libtorch had in the finding)\")\n";
    }
  }
  py << "print('RESULT:', 'the discrepancy shows' if bad else 'no discrepancy beyond the tolerance')\n";
  py << "sys.exit(1 if bad else 0)\n";
  write_repro_file(p, dir, p.main, py.str());
  return p;
}

std::vector<std::string> torch::writer_sink_calls(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    const Support s = support(g, n, Variant{}.qengine);
    if (!s.ok) return {"refused: " + s.reason};
  }
  std::vector<std::string> log;
  Lines lines;
  std::set<std::string> helpers;
  PythonSink python(lines, helpers);
  RecordingSink recording(python, log);
  try {
    for (const auto& n : g.nodes) lower_node(g, n, recording);
  } catch (const LoweringError& e) {
    log.push_back(std::string("error: ") + e.what());
  }
  return log;
}

}  // namespace quorum::backends
