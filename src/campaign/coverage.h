// A campaign's coverage (coverage/coverage.h): the facts of each model it ran, and the operators and
// losses each backend maps (its supports() answers), kept in the store so a resumed campaign goes on
// from what it covered.
#pragma once
#include <string>
#include <vector>

#include "campaign/evaluate.h"
#include "coverage/coverage.h"

namespace quorum::store {
class Store;
}  // namespace quorum::store

namespace quorum::campaign {

// The catalogue operators and losses the worker's backend maps: one it accepts in any of a few
// single-node cases drawn from the operator's domain (what `quorum backends` counts). `refused`
// gets the others with the backend's reason. UserError-free: a worker that cannot answer maps none.
std::vector<std::string> mapped_operators(worker::Worker& w,
                                          std::vector<std::pair<std::string, std::string>>* refused = nullptr);

// The coverage facts of one evaluated model: its operator facts, and for every backend that ran it
// (not refused, not kept from it) the operators it invoked there, with the loss when it trained.
std::vector<coverage::Fact> run_facts(const ModelCase& m, const Evaluation& ev, const std::string& loss,
                                    int64_t index);

// Loads the store's coverage into `cov`, then probes every backend of `backends` whose mapped
// operators the store does not hold yet (recording them, as model -1's facts).
void open_coverage(store::Store& store, coverage::Coverage& cov, const std::vector<worker::BackendSpec>& backends,
                   WorkerSet& workers);

}  // namespace quorum::campaign
