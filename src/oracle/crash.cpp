// The crash rule every oracle rule shares.
#include "oracle/judge_util.h"
#include "oracle/oracle.h"

namespace quorum::oracle {

namespace {

// The node whose output `message` names in single quotes (the first such name), or null.
const ir::Node* named_node(const ir::Graph& g, const std::string& message) {
  for (size_t a = message.find('\''); a != std::string::npos; a = message.find('\'', a + 1)) {
    const size_t b = message.find('\'', a + 1);
    if (b == std::string::npos) break;
    if (const ir::Node* n = g.producer(message.substr(a + 1, b - a - 1))) return n;
    a = b;
  }
  return nullptr;
}

}  // namespace

std::vector<Finding> crash_findings(const ir::Graph& g, const std::vector<BackendRun>& runs) {
  std::vector<Finding> out;
  bool someone_ok = false;
  for (const auto& r : runs) someone_ok |= r.outcome.ok();
  if (!someone_ok) return out;
  for (const auto& r : runs) {
    if (r.outcome.ok() || r.unsupported) continue;
    if (r.outcome.status == worker::Status::QuorumError || r.outcome.status == worker::Status::ProtocolError)
      continue;
    Finding f;
    f.kind = Kind::Crash;
    f.stage = r.failed_at;
    f.backend = r.backend;
    f.message = detail::crash_message(r.outcome);
    f.detail = (r.failed_at == Stage::Compile ? "conversion (model build) failure: " : "execution failure: ") +
               r.outcome.str();
    if (const ir::Node* n = named_node(g, r.outcome.message)) {
      f.node = n->name;
      f.op = n->op;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace quorum::oracle
