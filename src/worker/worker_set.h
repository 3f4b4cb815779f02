// Which libraries a run uses and their workers: a backend spec ("name:opt+opt") names a backend of
// the generated table with its options; a WorkerSet holds one worker per spec. Shared by the
// campaign and the conformance runner.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "worker/supervisor.h"

namespace quorum::worker {

struct BackendSpec {
  std::string name;
  std::vector<std::string> options;
  std::string str() const;  // "faulty:crash-on-op=relu+leak-until-oom"
};
// "torch,faulty:crash-on-op=relu+hang-on-shape=7" -> specs; UserError for unknown names.
std::vector<BackendSpec> parse_backends(const std::string& list);

// One worker per backend spec, started lazily and reused across models.
class WorkerSet {
 public:
  WorkerSet(const std::vector<BackendSpec>& specs, const Limits& limits);
  Worker& at(size_t i) { return *workers_[i]; }
  size_t size() const { return workers_.size(); }

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace quorum::worker
