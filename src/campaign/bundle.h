// Finding bundles: everything needed to file and replay one finding, in one directory written
// atomically (a temporary directory renamed into place).
#pragma once
#include <map>
#include <string>

#include "campaign/evaluate.h"

namespace quorum::campaign {

struct BundleContext {
  const ModelCase& model;
  const Evaluation& evaluation;
  const Setup& setup;
  uint64_t seed = 0;
  int64_t model_index = 0;
  std::string command_line;
  std::map<std::string, std::string> versions;  // backend spec -> library version
};

// Writes OUT/bundles/<id>/ for `f` and returns its path. Contents: model.json, inputs/*.npy,
// target.npy, outputs/<backend>/<value>.npy, grads/<backend>/<value>.npy, finding.json.
std::string write_bundle(const std::string& out_dir, const oracle::Finding& f, const BundleContext& ctx);

// Removes temporary directories left by a campaign that was killed while writing a bundle.
void clean_partial_bundles(const std::string& out_dir);

std::string replay_command(const std::string& bundle_dir);

struct Replayed {
  bool reproduced = false;
  std::string expected;               // the signature in the bundle
  std::vector<oracle::Finding> found;  // what the rerun found
};
// Reruns a bundle's model on the same backends with the same settings.
Replayed replay(const std::string& bundle_dir);

}  // namespace quorum::campaign
