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

// Every refusal a campaign counts per backend (the store's refusal rows), learned or not: a structured
// backends::Refusal under its key(), which the campaign learns; any other reason an Unsupported outcome
// gives (a supports() answer: "node 'conv_3': asymmetric pads") under "reason: " and the reason with its
// node name and the numbers standing alone elided ("reason: node: asymmetric pads"), which it only counts.
// `ops` gets the catalogue operators of the node the message names.
struct CountedRefusal {
  std::string key;
  std::vector<std::string> ops;
  std::optional<backends::Refusal> learned;  // set for a structured refusal
};
CountedRefusal counted_refusal(const ir::Graph& g, const std::string& message);
// Whether a stored refusal key is a learned (structured) refusal, not a counted reason.
bool learned_key(const std::string& key);

}  // namespace quorum::campaign
