// How an operator maps to ONNX and back, without ONNX or protobuf: the two contexts an OpSpec's
// ONNX hooks (OpSpec::onnx_export, OpSpec::onnx_import) are called with. src/ir/onnx_io.cpp
// implements them on top of the protobuf model and dispatches every node to its operator's hook.
//
// Export: a hook writes one ONNX node carrying the Quorum node's name and producing its output
// (`final_node`), or a short decomposition whose helper nodes and values are named "<node>/<what>"
// (`helper`, `h`), with constant operands written as initializers (`constant`, `scalar`, `ints`).
// It refuses, with a reason, what the chosen opset cannot express.
//
// Forms: where ONNX allows several equivalent spellings of a node (Gemm's flags or MatMul+Add,
// attributes written or left to their defaults, a fused operator or its decomposition, scales or
// sizes), the hook names them with `choose` (the plain one first) and writes the one chosen. The
// choice is seeded per model and node (ir::OnnxForm); an unseeded export always writes the first.
//
// Import: a hook reads the current ONNX node (inputs, attributes, constant inputs) and emits
// catalogue nodes; `emit_final` produces the node's first output under the ONNX node's name.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/attrs.h"
#include "core/tensor.h"

namespace quorum::ops {

// An ONNX node being written: attributes are added in call order.
class OnnxNode {
 public:
  virtual ~OnnxNode() = default;
  virtual OnnxNode& set_i(const std::string& name, int64_t v) = 0;
  virtual OnnxNode& set_f(const std::string& name, double v) = 0;  // stored as float32
  virtual OnnxNode& set_s(const std::string& name, const std::string& v) = 0;
  virtual OnnxNode& set_ints(const std::string& name, const std::vector<int64_t>& v) = 0;
  virtual OnnxNode& set_strings(const std::string& name, const std::vector<std::string>& v) = 0;
  // The operator set of a node outside ONNX's default domain ("com.microsoft": ONNX Runtime's contrib
  // operators, which OpenCV reads too); the model imports that domain at version 1.
  virtual OnnxNode& set_domain(const std::string& domain) = 0;
};

class OnnxExport {
 public:
  virtual ~OnnxExport() = default;
  virtual int opset() const = 0;
  // The Quorum node being exported.
  virtual const std::string& op() const = 0;
  virtual const std::string& name() const = 0;
  virtual const std::vector<std::string>& inputs() const = 0;
  virtual const core::Attrs& attrs() const = 0;
  const std::string& in(size_t i) const { return inputs().at(i); }
  virtual const std::string& out() const = 0;
  // Data type of input 0; shape of input i.
  virtual core::DType dtype() const = 0;
  virtual const core::Shape& in_shape(size_t i = 0) const = 0;
  int64_t ai(const std::string& k) const { return core::attr_i(attrs(), k); }
  double af(const std::string& k) const { return core::attr_f(attrs(), k); }
  const std::string& as(const std::string& k) const { return core::attr_s(attrs(), k); }
  const std::vector<int64_t>& aints(const std::string& k) const { return core::attr_ints(attrs(), k); }
  const std::vector<double>& afs(const std::string& k) const { return core::attr_floats(attrs(), k); }

  // The node producing the Quorum output; it carries the Quorum node's name.
  virtual OnnxNode& final_node(const std::string& type, const std::vector<std::string>& ins) = 0;
  // A helper node of a decomposition: its name and its output are "<node>/<what>" (made unique).
  virtual std::pair<OnnxNode*, std::string> helper(const std::string& type, const std::vector<std::string>& ins,
                                                   const std::string& what) = 0;
  std::string h(const std::string& type, const std::vector<std::string>& ins, const std::string& what) {
    return helper(type, ins, what).second;
  }
  // Any node, with the given (already unique) name and outputs ("" for an absent output).
  virtual OnnxNode& node(const std::string& type, const std::string& name, const std::vector<std::string>& ins,
                         const std::vector<std::string>& outs) = 0;
  // A constant operand written as the initializer "<node>/<what>" (made unique); returns its name.
  virtual std::string constant(const core::Tensor& t, const std::string& what) = 0;
  std::string scalar(double v, const std::string& what) {
    core::Tensor t(dtype(), {});
    t.set(0, v);
    return constant(t, what);
  }
  std::string ints(const std::vector<int64_t>& v, const std::string& what) {
    core::Tensor t(core::DType::I64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.i64()[i] = v[i];
    return constant(t, what);
  }
  // One of `forms` for this node (see "Forms" above): index 0 when the export is unseeded, else a
  // choice that is a function of the form seed, the node and `what`. Recorded as "<what>=<form>".
  virtual size_t choose(const std::string& what, const std::vector<std::string>& forms) = 0;
  // The same, when the alternatives are the plain form and one other: true for the other.
  bool choose2(const std::string& what, const std::string& plain, const std::string& other) {
    return choose(what, {plain, other}) == 1;
  }
  // A value name not yet used in the model, `base` or `base_<k>`.
  virtual std::string fresh(const std::string& base) = 0;
  // The graph's initializer called `value`, or null when it is computed.
  virtual const core::Tensor* initializer(const std::string& value) const = 0;
  // Throws UserError "<graph>: node 'N' (op): <why>".
  [[noreturn]] virtual void refuse(const std::string& why) const = 0;
};

class OnnxImport {
 public:
  virtual ~OnnxImport() = default;
  virtual int opset() const = 0;
  // The ONNX node being imported.
  virtual const std::string& op_type() const = 0;
  virtual int input_count() const = 0;  // absent ("") inputs included
  virtual int output_count() const = 0;
  virtual const std::string& output(int i) const = 0;
  // Input i's value name; fails "input i is missing" when absent.
  virtual const std::string& in(int i) const = 0;
  virtual bool present(int i) const = 0;
  virtual std::vector<std::string> inputs() const = 0;  // the present ones
  virtual bool has(const std::string& attr) const = 0;
  virtual int64_t geti(const std::string& attr, int64_t def) const = 0;
  virtual double getf(const std::string& attr, double def) const = 0;
  virtual std::string gets(const std::string& attr, const std::string& def) const = 0;
  virtual std::vector<int64_t> getints(const std::string& attr, std::vector<int64_t> def = {}) const = 0;
  virtual std::vector<std::string> getstrings(const std::string& attr) const = 0;  // empty when absent
  // Constant inputs (initializers, Constant nodes, inputs given values).
  virtual const core::Tensor* constant(int i) const = 0;  // null when absent or computed
  virtual const core::Tensor& need_constant(int i, const std::string& what) const = 0;
  virtual std::vector<int64_t> const_ints(int i, const std::string& what) const = 0;
  virtual double const_scalar(int i, const std::string& what) const = 0;
  // The type of a value (a constant used here becomes an initializer of the Quorum graph).
  virtual const core::TensorType& type_of(const std::string& value) = 0;
  // True when output i exists and something reads it.
  virtual bool output_used(int i) const = 0;
  // Adds a catalogue node. Without `out` it is a helper ("<node>/<op>"), else it produces the ONNX
  // value `out` and carries the ONNX node's name; `named` false: a helper node that still produces
  // the ONNX value `out`. Returns the output's name.
  virtual std::string emit(const std::string& op, const std::vector<std::string>& ins, const core::Attrs& attrs,
                           const std::string& out = "", bool named = true) = 0;
  // emit() producing output 0; fails if another output is used.
  virtual std::string emit_final(const std::string& op, const std::vector<std::string>& ins,
                                 const core::Attrs& attrs = {}) = 0;
  // A new initializer "<node>/<what>" (made unique); returns its name.
  virtual std::string new_initializer(const std::string& what, core::Tensor t) = 0;
  std::string scalar_like(const std::string& value, double x, const std::string& what) {
    core::Tensor t(type_of(value).dtype, {});
    t.set(0, x);
    return new_initializer(what, t);
  }
  // Throws UserError "<where>: node 'N' (OpType): <msg>".
  [[noreturn]] virtual void fail(const std::string& msg) const = 0;
};

}  // namespace quorum::ops
