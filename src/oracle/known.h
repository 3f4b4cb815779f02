// The known-issue ledger: per backend (src/backends/<name>/known_differences.json), entries that
// each hold a minimal case (model, inputs, target), the finding signature the case produces, a
// class (bug, convention, precision) and a note or link. Campaign findings whose signature matches
// an entry are labelled known (never hidden); `quorum known --check` re-runs every case; the
// agreement tests accept a disagreement only where an entry waives that (operator, case, stage).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"

namespace quorum::oracle {

// One sampled case of the backend agreement test that an entry explains: operator, case index,
// stage (FC: forward, LC: loss or its gradient, BC: gradients and the SGD step).
struct AgreementWaiver {
  std::string op;
  int case_index = 0;
  std::string stage;
};

struct KnownEntry {
  std::string id;
  std::string backend;    // the backend spec the case runs on ("onednn", "faulty:relu-nan-to-zero")
  std::string cls;        // "bug", "convention" or "precision"
  std::string signature;  // the finding the case produces
  // Other signatures of the same root cause (the same defect seen through sibling operators, e.g.
  // relu6 and clip beside relu): campaign findings with these are labelled with this entry too.
  std::vector<std::string> also;
  std::string note, link;
  bool has_case = false;
  std::string mode = "infer";  // infer | train
  ir::Graph model;
  backends::ValueMap inputs;   // float64 values
  core::Tensor target;         // train mode; empty = drawn as campaigns draw it
  std::vector<AgreementWaiver> agreement;
  std::string file;  // the ledger it came from
};

struct Ledger {
  std::vector<KnownEntry> entries;
  // The entry whose signature a finding's signature matches (backend options aside), or null.
  const KnownEntry* match(const std::string& signature) const;
};

// "kind|stage|backend:opts|op|params" -> the same with the backend's base name.
std::string base_signature(const std::string& signature);

// One ledger file; UserError naming the file and entry on anything malformed.
Ledger load_ledger(const std::string& path);
// Every backends/<name>/known_differences.json under `backends_dir` (missing files are empty).
Ledger load_ledgers(const std::string& backends_dir);
// Where this build's ledgers are (the source tree's src/backends).
std::string default_ledger_dir();

}  // namespace quorum::oracle
