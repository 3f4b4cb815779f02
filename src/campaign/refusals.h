// Learned refusals: what each backend of a campaign declared it does not run (a structured
// backends::Refusal in an Unsupported outcome), so that the campaign stops sending that backend
// models holding it. Shared by a campaign's jobs (thread-safe), kept in the store so a resumed
// campaign keeps them. Generic: keyed by the backend spec and the refusal's own content.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/refusal.h"
#include "ir/graph.h"

namespace quorum::campaign {

class LearnedRefusals {
 public:
  // Adds a refusal of `backend`; false when it was known already.
  bool learn(const std::string& backend, const backends::Refusal& r);
  // The first learned refusal of `backend` that `g` holds, with the nodes it covers.
  struct Match {
    backends::Refusal refusal;
    std::vector<std::string> nodes;
  };
  std::optional<Match> match(const std::string& backend, const ir::Graph& g) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<backends::Refusal>> by_backend_;
};

// The catalogue operators of the named nodes of `g`, each once, in node order.
std::vector<std::string> node_ops(const ir::Graph& g, const std::vector<std::string>& nodes);

}  // namespace quorum::campaign
