// A backend's structured refusal: the operator it does not run, named by the backend in a form
// Quorum can match against other models, so that a campaign learns it once and stops sending that
// backend models holding it (docs/findings.md, "Learned refusals"). The operator is an ONNX
// operator type at an opset (what a program behind the exec backend sees) or a catalogue operator,
// optionally only with one attribute value. Nothing here knows a library or an operator.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/onnx_io.h"

namespace quorum::backends {

struct Refusal {
  std::string op;           // "Erf" (an ONNX operator type) or "gelu" (a catalogue operator)
  std::string attr, value;  // one attribute value only ("auto_pad", "SAME_UPPER"); empty: every form
  int onnx_opset = 0;       // the opset whose export `op` names; 0: `op` is a catalogue operator

  // The one text form, also an UnsupportedError's message: "unsupported: Conv auto_pad=SAME_UPPER
  // (ONNX opset 13)", "unsupported: gelu".
  std::string str() const;
  // The key a campaign learns: str() without the "unsupported: " prefix.
  std::string key() const;
  // The nodes of `g` (their names) that hold what is refused: a node of the catalogue operator `op`
  // (with attr = value), or a node whose ONNX export at `onnx_opset` has an `op` node (with that
  // attribute value). Empty when none does or the model cannot be exported.
  std::vector<std::string> nodes_in(const ir::Graph& g) const;
  // The same for an ONNX refusal, on the summary of the model's export at `onnx_opset`.
  std::vector<std::string> nodes_in(const ir::OnnxSummary& onnx) const;
  bool operator==(const Refusal& o) const = default;
};

// str()'s form back ("unsupported: OP [ATTR=VALUE] [(ONNX opset N)]"); nullopt for anything else,
// such as a backend's free-text reason.
std::optional<Refusal> parse_refusal(const std::string& text);

// Whether two attribute values are the same: spaces, brackets and quotes ignored ("[1, 2]", "1,2"
// and "(1,2)" agree, as do "b'SAME_UPPER'" and "SAME_UPPER"), numbers compared as numbers within
// float32 rounding ("0.2" and "0.20000000298023224").
bool same_attr_value(const std::string& a, const std::string& b);

}  // namespace quorum::backends
