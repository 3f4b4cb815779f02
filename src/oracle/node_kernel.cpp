#include "oracle/node_kernel.h"

#include "ops/registry.h"

namespace quorum::oracle {
namespace {

ops::Inputs pointers(const std::vector<core::Tensor>& ts, size_t count) {
  ops::Inputs in;
  for (size_t i = 0; i < count && i < ts.size(); ++i) in.push_back(&ts[i]);
  return in;
}

}  // namespace

std::vector<core::Tensor> node_forward(const ir::Node& n, const std::vector<core::Tensor>& operands) {
  return ops::op(n.op).forward(pointers(operands, operands.size()), n.attrs);
}

std::vector<core::Tensor> node_vjp(const ir::Node& n, const std::vector<core::Tensor>& operands,
                                   const std::vector<core::Tensor>& outputs,
                                   const std::vector<core::Tensor>& incoming) {
  const ops::OpSpec& spec = ops::op(n.op);
  if (!spec.differentiable()) return {};
  return spec.vjp(pointers(operands, operands.size()), n.attrs, outputs, incoming);
}

Kernel forward_kernel(const ir::Node& n) {
  return [node = n](const std::vector<core::Tensor>& operands) { return node_forward(node, operands); };
}

Kernel backward_kernel(const ir::Node& n, std::vector<core::Tensor> incoming, std::vector<size_t> judged) {
  return [node = n, incoming = std::move(incoming),
          judged = std::move(judged)](const std::vector<core::Tensor>& operands) {
    const std::vector<core::Tensor> grads = node_vjp(node, operands, node_forward(node, operands), incoming);
    std::vector<core::Tensor> selected;
    for (size_t i : judged) selected.push_back(grads.at(i));
    return selected;
  };
}

Kernel gradient_kernel(const ir::Node& n, size_t input) {
  const size_t count = n.inputs.size();
  return [node = n, input, count](const std::vector<core::Tensor>& p) {
    const std::vector<core::Tensor> operands(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(count));
    const std::vector<core::Tensor> incoming(p.begin() + static_cast<std::ptrdiff_t>(count), p.end());
    return std::vector<core::Tensor>{node_vjp(node, operands, node_forward(node, operands), incoming).at(input)};
  };
}

}  // namespace quorum::oracle
