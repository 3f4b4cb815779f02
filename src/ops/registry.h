// The catalogue: every OpSpec, registered by its family file.
#pragma once
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "ops/op_spec.h"

namespace quorum::ops {

class Registry {
 public:
  void add(OpSpec spec);  // internal error on a duplicate name or a spec missing its parts
  const OpSpec* find(const std::string& name) const;
  std::vector<const OpSpec*> all() const;  // sorted by family, then name
  // The import hook an operator registered for an ONNX operator type, or null.
  const std::function<void(OnnxImport&)>* onnx_importer(const std::string& onnx_type) const;

 private:
  std::deque<OpSpec> specs_;
  std::map<std::string, const OpSpec*> by_name_;
  std::map<std::string, const std::function<void(OnnxImport&)>*> onnx_import_;
};

const Registry& catalogue();
// Like catalogue().find but throws UserError "unknown operator 'X'".
const OpSpec& op(const std::string& name);

// One function per family file.
void register_eltwise(Registry& r);
void register_binary(Registry& r);
void register_conv(Registry& r);
void register_pool(Registry& r);
void register_dense(Registry& r);
void register_norm(Registry& r);
void register_softmax(Registry& r);
void register_reduce(Registry& r);
void register_shape(Registry& r);
void register_resize(Registry& r);
void register_rnn(Registry& r);
void register_loss(Registry& r);
void register_quant(Registry& r);
void register_qlinear(Registry& r);  // after the float operators it quantizes

}  // namespace quorum::ops
