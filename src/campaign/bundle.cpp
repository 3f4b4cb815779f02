// Bundle writing and replay.
#include "campaign/bundle.h"

#include <algorithm>
#include <limits>

#include "core/rng.h"

#include "localize/rate_map.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/fileio.h"
#include "core/npy.h"
#include "ir/json_io.h"
#include "ir/onnx_io.h"

namespace quorum::campaign {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::string safe_name(const std::string& s) {
  std::string o;
  for (char c : s)
    o.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_');
  return o;
}

std::string short_hash(const std::string& s) {
  const uint64_t h = core::fnv1a(s);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h & 0xffffffffull));
  return buf;
}

void save_values(const fs::path& dir, const backends::ValueMap& m) {
  core::make_directories(dir.string());
  for (const auto& [name, t] : m)
    if (t.defined()) core::write_npy((dir / (safe_name(name) + ".npy")).string(), t);
}

json setup_json(const Setup& s) {
  json backends = json::array();
  for (const auto& b : s.backends) backends.push_back(b.str());
  return {{"backends", backends},
          {"mode", to_string(s.mode)},
          {"dtype", core::to_string(s.dtype)},
          {"threads", s.threads},
          {"loss", s.loss},
          {"learning_rate", s.learning_rate},
          {"timeout_s", s.limits.timeout_s},
          {"memory_mb", s.limits.address_space_mb},
          {"T", s.thresholds.T},
          {"eps", s.thresholds.eps},
          {"relative_metric", s.thresholds.relative_metric},
          {"oracle", oracle::to_string(s.thresholds.rule)},
          {"optimized", s.optimized},
          {"batch_relation",
           {{"on", s.batch_relation.on}, {"batch", s.batch_relation.batch}, {"position", s.batch_relation.position}}},
          {"form_relation", {{"on", s.form_relation.on}, {"draw", s.form_relation.draw}}},
          {"position_relation",
           {{"on", s.position_relation.on},
            {"axis", s.position_relation.axis},
            {"length", s.position_relation.length},
            {"position", s.position_relation.position}}}};
}

// The setup a bundle records: the campaign's, with the relations' draws for this model fixed (its replay and
// reduction widen the batch and the axis as the campaign did).
json setup_json(const Setup& s, const Evaluation& ev) {
  Setup fixed = s;
  if (ev.batch > 0) fixed.batch_relation.batch = ev.batch, fixed.batch_relation.position = ev.position;
  if (ev.positioned.length > 0) fixed.position_relation = ev.positioned;
  return setup_json(fixed);
}

// An integer field: a JSON integer only (a float would convert with undefined behaviour past the type's range).
template <class T>
T integer(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) throw core::UserError(std::string(key) + " is not an integer");
  const int64_t x = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                                           : v.get<int64_t>();
  if (x < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
    throw core::UserError(std::string(key) + " is out of range");
  return static_cast<T>(x);
}

Setup setup_from_json(const json& j, const std::string& where) {
  try {
    Setup s;
    std::string list;
    for (const auto& b : j.at("backends")) list += (list.empty() ? "" : ",") + b.get<std::string>();
    s.backends = parse_backends(list);
    s.mode = mode_from_string(j.at("mode").get<std::string>());
    s.dtype = core::dtype_from_string(j.at("dtype").get<std::string>());
    s.threads = integer<int>(j, "threads");
    s.loss = j.at("loss").get<std::string>();
    s.learning_rate = j.at("learning_rate").get<double>();
    s.limits.timeout_s = j.at("timeout_s").get<double>();
    s.limits.address_space_mb = integer<uint64_t>(j, "memory_mb");
    s.thresholds.T = j.at("T").get<double>();
    s.thresholds.eps = j.at("eps").get<double>();
    s.thresholds.relative_metric = j.at("relative_metric").get<bool>();
    // Bundles written before the per-node rule existed were judged by Muffin's rule.
    s.thresholds.rule = oracle::rule_from_string(j.value("oracle", std::string("muffin")));
    s.thresholds.dtype = s.dtype;
    // Bundles written before the optimized run existed ran without it.
    s.optimized = j.value("optimized", false);
    // ... and before the batch relation.
    if (const auto b = j.find("batch_relation"); b != j.end()) {
      s.batch_relation.on = b->at("on").get<bool>();
      s.batch_relation.batch = integer<int64_t>(*b, "batch");
      s.batch_relation.position = integer<int64_t>(*b, "position");
    }
    // ... and before the form relation.
    if (const auto f = j.find("form_relation"); f != j.end()) {
      s.form_relation.on = f->at("on").get<bool>();
      s.form_relation.draw = integer<uint64_t>(*f, "draw");
    }
    // ... and before the position relation.
    if (const auto p = j.find("position_relation"); p != j.end()) {
      s.position_relation.on = p->at("on").get<bool>();
      s.position_relation.axis = integer<int>(*p, "axis");
      s.position_relation.length = integer<int64_t>(*p, "length");
      s.position_relation.position = integer<int64_t>(*p, "position");
    }
    return s;
  } catch (const json::exception& e) {
    throw core::UserError(where + ": malformed setup: " + e.what());
  } catch (const core::UserError& e) {  // a backend list, mode, dtype or rule no build knows
    throw core::UserError(where + ": malformed setup: " + e.what());
  }
}

}  // namespace

std::string bundle_file_name(const std::string& value) { return safe_name(value); }

json parse_finding(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw core::UserError(where + ": malformed JSON: " + e.what());
  }
  if (!j.is_object()) throw core::UserError(where + ": malformed finding: not a JSON object");
  return j;
}

json read_finding(const std::string& bundle_dir) {
  const std::string fpath = (fs::path(bundle_dir) / "finding.json").string();
  return parse_finding(core::read_file(fpath), fpath);
}

Setup finding_setup(const json& finding, const std::string& where) {
  const auto it = finding.find("setup");
  if (it == finding.end()) throw core::UserError(where + ": malformed finding: no \"setup\"");
  return setup_from_json(*it, where);
}

Setup bundle_setup(const std::string& bundle_dir) {
  const std::string fpath = (fs::path(bundle_dir) / "finding.json").string();
  return finding_setup(read_finding(bundle_dir), fpath);
}

namespace {

// The localization map of an inconsistency or NaN finding: the blamed backend against the first
// one it disagrees with (map.json, map.svg; map.dot when Graphviz cannot lay it out).
void write_map(const fs::path& dir, const oracle::Finding& f, const BundleContext& ctx) {
  if (f.kind == oracle::Kind::Crash || f.stage == oracle::Stage::Compile) return;
  const oracle::BackendRun* blamed = nullptr;
  const oracle::BackendRun* other = nullptr;
  const oracle::BackendRun* ref = nullptr;
  const std::string other_name = f.against.empty() ? "ref" : f.against[0];
  for (const auto& r : ctx.evaluation.runs) {
    if (r.backend == f.backend) blamed = &r;
    if (r.backend == other_name) other = &r;
    if (r.is_reference) ref = &r;
  }
  if (!other) other = ref;
  if (!blamed || !other || !ref) return;
  const bool backward = f.stage == oracle::Stage::Backward;
  const localize::RateMap m =
      localize::rate_map(ctx.model.graph, backward, blamed->backend, backward ? blamed->grads : blamed->values,
                         other->backend, backward ? other->grads : other->values, backward ? ref->grads : ref->values);
  core::write_file_atomic((dir / "map.json").string(), localize::to_json(m));
  const std::string dot = localize::to_dot(ctx.model.graph, m);
  const std::string svg = ctx.defer_layout ? "" : localize::render_svg(dot);
  if (svg.empty()) core::write_file_atomic((dir / "map.dot").string(), dot);
  else core::write_file_atomic((dir / "map.svg").string(), svg);
}

}  // namespace

void lay_out_map(const std::string& bundle_dir) {
  const fs::path dot = fs::path(bundle_dir) / "map.dot";
  if (!fs::exists(dot)) return;
  const std::string svg = localize::render_svg(core::read_file(dot.string()));
  if (svg.empty()) return;
  core::write_file_atomic((fs::path(bundle_dir) / "map.svg").string(), svg);
  std::error_code ec;
  fs::remove(dot, ec);
}

backends::ValueMap read_recorded(const std::string& dir, const ir::Graph& g) {
  namespace fs = std::filesystem;
  backends::ValueMap m;
  std::vector<std::string> names;
  for (const auto& n : g.nodes) names.insert(names.end(), n.outputs.begin(), n.outputs.end());
  for (const auto& [w, t] : g.initializers) names.push_back(w);
  for (const auto& in : g.inputs) names.push_back(in.name);
  for (const auto& v : names) {
    const fs::path p = fs::path(dir) / (bundle_file_name(v) + ".npy");
    std::error_code ec;
    if (fs::exists(p, ec)) m.emplace(v, core::read_npy(p.string()).to(core::DType::F64));
  }
  return m;
}

backends::ValueMap read_recorded_values(const std::string& bundle_dir, const std::string& backend, const ir::Graph& g,
                                        bool training) {
  const fs::path dir(bundle_dir);
  if (training) {
    backends::ValueMap m = read_recorded((dir / "train_outputs" / bundle_file_name(backend)).string(), g);
    if (!m.empty()) return m;
  }
  return read_recorded((dir / "outputs" / bundle_file_name(backend)).string(), g);
}

std::vector<std::string> list_bundles(const std::string& campaign_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(fs::path(campaign_dir) / "bundles", ec)) return out;
  for (const auto& e : fs::directory_iterator(fs::path(campaign_dir) / "bundles"))
    if (e.is_directory() && fs::exists(e.path() / "finding.json")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string replay_command(const std::string& bundle_dir) { return "quorum replay " + bundle_dir; }

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

// A temporary bundle is named .tmp-<id>@<host>@<pid>@<thread>: shards share the bundles folder,
// so only the directories of processes of this host that are gone are removed.
void clean_partial_bundles(const std::string& out_dir) {
  const fs::path root = fs::path(out_dir) / "bundles";
  std::error_code ec;
  if (!fs::exists(root, ec)) return;
  const std::string host = host_name();
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    const size_t t = name.rfind('@');
    const size_t p = t == std::string::npos || t == 0 ? std::string::npos : name.rfind('@', t - 1);
    const size_t h = p == std::string::npos || p == 0 ? std::string::npos : name.rfind('@', p - 1);
    if (h != std::string::npos) {
      if (name.substr(h + 1, p - h - 1) != host) continue;  // another machine's
      const long pid = std::strtol(name.c_str() + p + 1, nullptr, 10);
      if (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;  // still writing
    }
    fs::remove_all(e.path(), ec);
  }
}

std::string write_bundle(const std::string& out_dir, const oracle::Finding& f, const BundleContext& ctx) {
  const std::string id = safe_name(std::string(oracle::to_string(f.kind)) + "-" + oracle::to_string(f.stage) + "-" +
                                   f.backend + "-" + (f.op.empty() ? "model" : f.op)) +
                         "-" + short_hash(f.signature());
  return write_bundle_at((fs::path(out_dir) / "bundles" / id).string(), f, ctx);
}

std::string write_bundle_at(const std::string& dir, const oracle::Finding& f, const BundleContext& ctx) {
  const fs::path final_dir(dir);
  const fs::path root = final_dir.parent_path();
  const std::string id = final_dir.filename().string();
  core::make_directories(root.string());
  std::ostringstream tid;
  tid << std::this_thread::get_id();
  const fs::path tmp = root / (".tmp-" + id + "@" + host_name() + "@" + std::to_string(::getpid()) + "@" + tid.str());
  fs::remove_all(tmp);
  core::make_directories(tmp.string());
  const std::string bundle_path = final_dir.string();
  // A write that fails (a full disk) leaves no partial bundle behind.
  try {
    ir::save_graph((tmp / "model.json").string(), ctx.model.graph);
    // The exchange form too, for engines that read ONNX (a model the exporter cannot express gets none).
    try {
      core::write_file_atomic((tmp / "model.onnx").string(), ir::graph_to_onnx(ctx.model.graph));
    } catch (const core::UserError&) {
    }
    // Each backend that read the model as ONNX: the opset and exchange forms it read (its lowering's
    // "onnx ..." entries), and the very model it read, onnx/<backend>.onnx: the model's form seed with each
    // node's recorded forms (those the engine's own avoid list and variant chose), so the file is the one
    // the engine loaded.
    json exchange = json::object();
    for (const auto& [backend, nodes] : ctx.evaluation.exchange) {
      json e = {{"form_seed", ir::form_seed(ctx.model.graph)}, {"forms", json::object()}};
      for (const auto& [node, list] : nodes)
        for (const auto& x : list) {
          if (x.rfind("onnx opset ", 0) == 0) e["opset"] = std::stoi(x.substr(11));
          else if (x.rfind("onnx form ", 0) == 0) e["forms"][node] = x.substr(10);
        }
      if (e.contains("opset")) {
        try {
          ir::OnnxForm form{e["opset"].get<int>(), ir::form_seed(ctx.model.graph)};
          for (const auto& [node, forms] : e["forms"].items()) form.node_forms[node] = forms.get<std::string>();
          core::make_directories((tmp / "onnx").string());
          core::write_file_atomic((tmp / "onnx" / (safe_name(backend) + ".onnx")).string(),
                                  ir::graph_to_onnx(ctx.model.graph, form).bytes);
        } catch (const core::UserError&) {
        }
      }
      exchange[backend] = e;
    }
    save_values(tmp / "inputs", ctx.model.inputs);
    core::write_npy((tmp / "target.npy").string(), ctx.model.target);
    json backends = json::array();
    for (const auto& r : ctx.evaluation.runs) {
      save_values(tmp / "outputs" / safe_name(r.backend), r.values);
      if (!r.train_values.empty()) save_values(tmp / "train_outputs" / safe_name(r.backend), r.train_values);
      if (r.trained) save_values(tmp / "grads" / safe_name(r.backend), r.grads);
      const auto v = ctx.versions.find(r.backend);
      backends.push_back(
          {{"backend", r.backend},
           {"version", v == ctx.versions.end() ? (r.is_reference ? "quorum float64 reference" : "") : v->second},
           {"outcome", r.outcome.str()},
           {"trained", r.trained},
           {"loss", r.trained ? json(r.loss) : json(nullptr)}});
    }
    json j = {{"quorum_version", QUORUM_VERSION},
              {"signature", f.signature()},
              {"kind", oracle::to_string(f.kind)},
              {"stage", oracle::to_string(f.stage)},
              {"backend", f.backend},
              {"against", f.against},
              {"known", f.known},
              {"node", f.node},
              {"lowering", f.lowering},
              {"op", f.op},
              {"params", f.params},
              {"distance", f.distance},
              {"rate", f.rate},
              {"message", f.message},
              {"detail", f.detail},
              {"backends", backends},
              {"setup", setup_json(ctx.setup, ctx.evaluation)},
              {"seed", ctx.seed},
              {"model_index", ctx.model_index},
              {"command_line", ctx.command_line},
              {"method", ctx.method.empty() ? "random" : ctx.method},
              {"replay", replay_command(bundle_path)}};
    if (!exchange.empty()) j["exchange"] = exchange;
    if (!ctx.origin.empty()) j["origin"] = ctx.origin;
    if (!ctx.detection.empty()) j["detection"] = json::parse(ctx.detection);
    core::write_file_atomic((tmp / "finding.json").string(), j.dump(1) + "\n");
    write_map(tmp, f, ctx);
  } catch (...) {
    std::error_code rm;
    fs::remove_all(tmp, rm);
    throw;
  }
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // a bundle left by a run killed before its commit
  fs::rename(tmp, final_dir, ec);
  if (ec) core::write_failed(bundle_path, ec.value());
  return bundle_path;
}

}  // namespace quorum::campaign
