// Standalone reproducers: a finding bundle turned into a program in the blamed library's own API
// (the writers live in src/backends/<name>/repro.cpp; the contract in backends/repro.h).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backends/repro.h"

namespace quorum::report {

// The case a reproducer shows, read from a bundle: its reduced case (BUNDLE/reduced) when there is
// one, else the blamed node alone fed the library's recorded operands, else the whole model.
// Expected values are Quorum's float64 reference run here on the same operands.
backends::ReproCase load_repro_case(const std::string& bundle_dir);
// The finding's part of a case (backend, library version, signature, kind, stage, op, node, detail,
// known, lowering, seed, ...): from a bundle's finding.json (`top`) and the finding.json of the case
// shown (`shown`: its reduced case's, or `top` again). UserError naming `where` when a field is
// missing or of the wrong type.
void read_finding_fields(const nlohmann::ordered_json& top, const nlohmann::ordered_json& shown,
                         const std::string& where, backends::ReproCase& c);

// The backends that have a reproducer writer.
std::vector<std::string> repro_backends();

struct Repro {
  bool written = false;
  std::string dir;     // where the files are
  std::string reason;  // why not, when !written
  backends::ReproProgram program;
};

// Writes the reproducer of the bundle's finding into `out_dir` (created; default BUNDLE/repro).
// A library without a writer, or a case its writer cannot express, gives written=false and the
// reason (also written to out_dir/README.txt, with the replay command).
Repro write_repro(const std::string& bundle_dir, const std::string& out_dir = "");

// The main program of a reproducer folder write_repro wrote (repro.py, repro.cpp or run.sh), or ""
// when it holds none (a README.txt saying why).
std::string repro_main(const std::string& repro_dir);

}  // namespace quorum::report
