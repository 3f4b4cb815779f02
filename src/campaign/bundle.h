// Finding bundles: everything needed to file and replay one finding, in one directory written
// atomically (a temporary directory renamed into place).
#pragma once
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

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
  // How the model came about when not from a campaign's generator ("transfer from ledger entry ..."):
  // finding.json "origin", shown in the issue text and the report. Empty: the campaign's model.
  std::string origin;
  // How the case was found: empty for the campaign's random draw, else the search method (ga, diverge)
  // whose failure-inducing inputs and weights the bundle holds.
  std::string method;
  // quorum detect's settings, pair, metric and pattern (a JSON object's text) for a detection finding:
  // finding.json "detection", which replay judges the rerun with. Empty for every other finding.
  std::string detection = {};
  // Leave the localization map as map.dot for lay_out_map() (a campaign's background reducer runs
  // Graphviz, so a job never waits on it); false: map.svg at once.
  bool defer_layout = false;
};

// Lays out a bundle's map.dot with Graphviz into map.svg (removing map.dot); nothing when the bundle
// has no map.dot or Graphviz cannot lay it out.
void lay_out_map(const std::string& bundle_dir);

// Writes OUT/bundles/<id>/ for `f` and returns its path. Contents: model.json, inputs/*.npy,
// target.npy, outputs/<backend>/<value>.npy, train_outputs/<backend>/<value>.npy (the training
// pass's own forward values, where it ran beside an inference pass), grads/<backend>/<value>.npy,
// finding.json.
// Every inconsistency and NaN bundle also holds the finding's localization map (map.json, map.svg).
std::string write_bundle(const std::string& out_dir, const oracle::Finding& f, const BundleContext& ctx);
// The same, into the directory `dir` itself (a reduced case beside its bundle: BUNDLE/reduced).
std::string write_bundle_at(const std::string& dir, const oracle::Finding& f, const BundleContext& ctx);
// A bundle's finding.json; UserError naming the file when it is malformed.
nlohmann::ordered_json read_finding(const std::string& bundle_dir);
// The same from the file's text (`where` names it): UserError unless it is a JSON object.
nlohmann::ordered_json parse_finding(const std::string& text, const std::string& where);
// The settings a bundle's finding was found with (its finding.json "setup").
Setup bundle_setup(const std::string& bundle_dir);
// The same from a parsed finding.json; UserError naming `where` when "setup" is missing or malformed.
Setup finding_setup(const nlohmann::ordered_json& finding, const std::string& where);
// The file name (without .npy) a value is saved under in a bundle.
std::string bundle_file_name(const std::string& value);

// Every value recorded under `dir` (a bundle's outputs/<backend> or grads/<backend>) for the graph's
// node outputs, weights and graph inputs, as float64; values without a file are left out.
backends::ValueMap read_recorded(const std::string& dir, const ir::Graph& g);
// The forward values `backend` computed in a bundle, as the oracle judged them: for a loss or
// backward finding (`training`) the training pass's own (train_outputs/) where the bundle has
// them, else outputs/.
backends::ValueMap read_recorded_values(const std::string& bundle_dir, const std::string& backend, const ir::Graph& g,
                                        bool training);

// A campaign's bundle folders (CAMPAIGN/bundles/* holding finding.json), sorted; empty when none.
std::vector<std::string> list_bundles(const std::string& campaign_dir);

// Removes temporary directories left by a campaign that was killed while writing a bundle (on a
// bundles folder shards share, only those of this host's processes that are gone).
void clean_partial_bundles(const std::string& out_dir);

std::string replay_command(const std::string& bundle_dir);

}  // namespace quorum::campaign
