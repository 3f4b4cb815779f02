// Replaying a bundle.
#include "campaign/replay.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "campaign/bundle.h"
#include "campaign/trained_detection.h"
#include "core/npy.h"
#include "ir/json_io.h"

namespace quorum::campaign {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

Replayed replay(const std::string& bundle_dir) {
  const fs::path dir(bundle_dir);
  const std::string fpath = (dir / "finding.json").string();
  const json j = read_finding(bundle_dir);
  ModelCase m;
  m.graph = ir::load_graph((dir / "model.json").string());
  for (const auto& in : m.graph.inputs) {
    const fs::path file = dir / "inputs" / (bundle_file_name(in.name) + ".npy");
    m.inputs.emplace(in.name, core::read_npy(file.string()).to(core::DType::F64));
  }
  m.target = core::read_npy((dir / "target.npy").string());
  const Setup setup = finding_setup(j, fpath);
  WorkerSet workers(setup.backends, setup.limits);
  const Evaluation ev = evaluate(m, setup, workers);
  Replayed r;
  r.expected = j.at("signature").get<std::string>();
  r.found = ev.findings;
  // A detection finding (quorum detect) is judged again by its pair's distance on the bundle's input.
  if (const auto d = j.find("detection"); d != j.end())
    if (auto f = replay_detection(m, ev, d->dump())) r.found.insert(r.found.begin(), *f);
  for (const auto& f : r.found) r.reproduced |= f.signature() == r.expected;
  return r;
}

}  // namespace quorum::campaign
