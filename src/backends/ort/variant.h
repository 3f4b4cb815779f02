// The ONNX Runtime backend's execution variants (backend options, docs/backends.md) and where its
// runner and the onnxruntime-node package live, shared by the backend and its reproducer writer
// (built without the backend, hence inline here). No ONNX Runtime header anywhere: the library runs
// in the project's Node runner (runner.js), started by the worker through the exec protocol.
//
//   ort:level=disabled|basic|extended|all   graphOptimizationLevel (default disabled: the pinned run)
//   ort:threads=N                           intraOpNumThreads (default the compile options' count)
//   ort:arena=off                           enableCpuMemArena false
//   ort:mode=parallel                       executionMode 'parallel' (inter-op parallelism)
//   ort:opset=N                             every model at ONNX opset N instead of its seeded opset
//   ort:plain                               every model in the plain exchange form (form seed 0)
//   ort:form=WHAT=FORM                      that exchange form wherever a node has the choice (repeatable)
#pragma once
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "ir/onnx_io.h"

namespace quorum::backends::ort {

// The ONNX written for ONNX Runtime: every opset the exporter writes (ORT 1.30 loads 7 to 23), the
// model's seeded exchange form.
constexpr int kMinOpset = 11;
constexpr int kMaxOpset = 17;
// The release the project pins (src/backends/ort/package.json); another one is the user's choice
// through QUORUM_ORT_MODULES, and the backend's version string then names what it loaded.
constexpr const char* kPinnedVersion = "1.30.0";
constexpr const char* kLevels[] = {"disabled", "basic", "extended", "all"};

struct Variant {
  std::string level = "disabled";
  int threads = 0;  // 0: the compile options' count
  bool arena = true;
  bool parallel = false;
  int opset = 0;  // 0: the model's seeded opset
  bool plain = false;              // form seed 0
  std::vector<std::string> forms;  // "what=form", forced (ir::OnnxForm::force)
};

inline Variant parse_variant(const std::vector<std::string>& args) {
  Variant v;
  for (const auto& a : args) {
    if (a.rfind("level=", 0) == 0) {
      v.level = a.substr(6);
      bool known = false;
      for (const char* l : kLevels) known = known || v.level == l;
      if (!known)
        throw core::UserError("backend 'ort': level= takes one of disabled, basic, extended, all, got '" + a + "'");
    } else if (a.rfind("threads=", 0) == 0) {
      v.threads = count_option("ort", a);
    } else if (a == "arena=off") {
      v.arena = false;
    } else if (a == "mode=parallel") {
      v.parallel = true;
    } else if (a.rfind("opset=", 0) == 0) {
      v.opset = count_option("ort", a);
      if (v.opset < kMinOpset || v.opset > kMaxOpset)
        throw core::UserError("backend 'ort': opset= takes " + std::to_string(kMinOpset) + " to " +
                              std::to_string(kMaxOpset) + ", got '" + a + "'");
    } else if (a == "plain") {
      v.plain = true;
    } else if (a.rfind("form=", 0) == 0) {
      v.forms.push_back(form_option("ort", a));
    } else {
      throw core::UserError("backend 'ort': unknown option '" + a +
                            "' (level=disabled|basic|extended|all, threads=N, arena=off, mode=parallel, opset=N, "
                            "plain, form=WHAT=FORM)");
    }
  }
  return v;
}

// The form a model is written in for ORT: its seeded form at an opset from 11 to 17, or the
// variant's opset; `plain` the seeded form, and the variant's forced forms wherever a node has them.
inline ir::OnnxForm onnx_form(const ir::Graph& g, const Variant& v = {}) {
  ir::OnnxForm f = ir::seeded_form(g, kMinOpset, kMaxOpset);
  if (v.opset) f.opset = v.opset;
  if (v.plain) f.seed = 0;
  f.force = v.forms;
  return f;
}

// The runner's options for the variant (runner.js reads them). Without threads=N the runner takes
// the session's count from QUORUM_THREADS, as every runner does.
inline std::vector<std::string> runner_options(const Variant& v) {
  std::vector<std::string> o = {"--level=" + v.level};
  if (v.threads > 0) o.push_back("--threads=" + std::to_string(v.threads));
  if (!v.arena) o.push_back("--arena=off");
  if (v.parallel) o.push_back("--mode=parallel");
  if (v.level != "disabled") o.push_back("--optimized-model");
  return o;
}

// The node_modules folder onnxruntime-node is loaded from: $QUORUM_ORT_MODULES when set (a user's
// other ORT release), else the project's install beside the runner (`make deps`).
inline std::string modules_dir(const std::string& ort_dir) {
  const char* env = std::getenv("QUORUM_ORT_MODULES");
  return env && *env ? std::string(env) : ort_dir + "/node_modules";
}

// The one line a missing install gives, naming the command that installs it; "" when installed.
inline std::string missing_install(const std::string& ort_dir) {
  const std::string modules = modules_dir(ort_dir);
  struct stat st {};
  if (::stat((modules + "/onnxruntime-node/package.json").c_str(), &st) == 0) return "";
  return "backend 'ort': ONNX Runtime is not installed (no onnxruntime-node in " + modules +
         "): run `make deps` (it runs `npm ci` in src/backends/ort), or point QUORUM_ORT_MODULES at a node_modules "
         "folder that holds onnxruntime-node";
}

}  // namespace quorum::backends::ort
