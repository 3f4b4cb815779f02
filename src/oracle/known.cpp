// Reading the known-issue ledgers.
#include "oracle/known.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/cpu.h"
#include "core/error.h"
#include "ir/json_io.h"
#include "ops/registry.h"

namespace quorum::oracle {

namespace {

using json = nlohmann::json;
using core::UserError;

double number(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw UserError(where + ": expected a number (or \"nan\", \"inf\", \"-inf\"), got " + v.dump());
}

// {"shape": [...], "data": [...]} as float64.
core::Tensor tensor(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("shape") || !j.contains("data"))
    throw UserError(where + ": a tensor is {\"shape\": [...], \"data\": [...]}");
  if (!j.at("shape").is_array() || j.at("shape").size() > 16)
    throw UserError(where + ": a tensor's \"shape\" is a list of at most 16 dimensions");
  core::Shape shape;
  double elements = 1;
  for (const auto& d : j.at("shape")) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw UserError(where + ": a tensor's dimensions are non-negative integers, got " + d.dump());
    shape.push_back(d.get<int64_t>());
    elements *= static_cast<double>(shape.back());
  }
  // The data list holds every element: a shape larger than it is refused before allocating.
  if (!j.at("data").is_array() || elements != static_cast<double>(j.at("data").size()))
    throw UserError(where + ": " + std::to_string(j.at("data").size()) + " data values for shape " +
                    core::to_string(shape));
  core::Tensor t(core::DType::F64, shape);
  const json& data = j.at("data");
  if (!data.is_array() || static_cast<int64_t>(data.size()) != t.numel())
    throw UserError(where + ": " + std::to_string(data.size()) + " data values for shape " + core::to_string(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.f64()[i] = number(data[static_cast<size_t>(i)], where);
  return t;
}

std::string str(const json& e, const char* key, const std::string& where, bool required = true) {
  if (!e.contains(key)) {
    if (required) throw UserError(where + ": missing \"" + key + "\"");
    return "";
  }
  if (!e.at(key).is_string()) throw UserError(where + ": \"" + key + "\" must be a string");
  return e.at(key).get<std::string>();
}

// The flags of `flags` this CPU has (`present`) or lacks, comma-separated.
std::string flags_where(const std::vector<std::string>& flags, bool present) {
  std::string out;
  for (const auto& f : flags)
    if ((core::cpu_flags().count(f) > 0) == present) out += (out.empty() ? "" : ", ") + f;
  return out;
}

std::string listed(const std::vector<std::string>& flags) {
  std::string out;
  for (const auto& f : flags) out += (out.empty() ? "" : ", ") + f;
  return out;
}

}  // namespace

std::string KnownEntry::cpu_unmet() const {
  const std::string missing = flags_where(needs_cpu, false), present = flags_where(lacks_cpu, true);
  if (!missing.empty()) return "needs " + listed(needs_cpu) + "; here " + core::cpu_model() + ", without " + missing;
  if (!present.empty())
    return "needs a CPU without " + listed(lacks_cpu) + "; here " + core::cpu_model() + ", with " + present;
  return "";
}

std::string base_signature(const std::string& signature) {
  // kind|stage|backend|...: drop the backend's ":options".
  const size_t a = signature.find('|');
  const size_t b = a == std::string::npos ? a : signature.find('|', a + 1);
  const size_t c = b == std::string::npos ? b : signature.find('|', b + 1);
  if (c == std::string::npos) return signature;
  const std::string backend = signature.substr(b + 1, c - b - 1);
  const size_t colon = backend.find(':');
  if (colon == std::string::npos) return signature;
  return signature.substr(0, b + 1) + backend.substr(0, colon) + signature.substr(c);
}

std::string signature_op(const std::string& signature) {
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {  // past kind, stage, backend
    at = signature.find('|', at);
    if (at == std::string::npos) return "";
    ++at;
  }
  const size_t end = signature.find('|', at);
  return signature.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

namespace {

// '*' matches any run of characters (none included); everything else itself.
bool glob(const std::string& pattern, const std::string& s) {
  size_t p = 0, i = 0, star = std::string::npos, from = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      from = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p, ++i;
    } else if (star != std::string::npos) {
      p = star + 1;
      i = ++from;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

namespace {

bool names_options(const std::string& signature) { return base_signature(signature) != signature; }

// A signature (or pattern) whose backend field names options ("onednn:isa=avx2", "torch:qengine=qnnpack")
// holds only for findings of a backend run with them: those options choose another library path (another
// instruction set's kernels, another quantized engine). One without options holds for the backend under any
// options (a form or opset an option forces is a form a campaign also picks per node).
const std::string& compared(const std::string& pattern, const std::string& full, const std::string& base) {
  return names_options(pattern) ? full : base;
}

}  // namespace

bool KnownPattern::matches(const std::string& sig, const std::vector<std::string>& node_lowering,
                           bool flushed) const {
  if (subnormals_flushed && !flushed) return false;
  if (!glob(signature, compared(signature, sig, base_signature(sig)))) return false;
  if (lowering.empty()) return true;
  for (const auto& op : lowering)
    for (const auto& l : node_lowering)
      if (glob(op, l)) return true;
  return false;
}

std::string KnownPattern::str() const {
  std::string s = signature;
  if (subnormals_flushed) s += "  where the operands' subnormals read as zeros explain it";
  if (lowering.empty()) return s;
  s += "  when the node ran ";
  for (size_t i = 0; i < lowering.size(); ++i) s += (i ? (i + 1 == lowering.size() ? " or " : ", ") : "") + lowering[i];
  return s;
}

const KnownEntry* Ledger::match(const std::string& signature, const std::vector<std::string>& lowering,
                                bool subnormals_flushed) const {
  const std::string base = base_signature(signature);
  auto equal = [&](const std::string& s) { return s == compared(s, signature, base); };
  // An entry whose case shows only on CPUs without some feature (lacks_cpu) labels nothing on a CPU with it:
  // the library runs another kernel here.
  auto excluded = [](const KnownEntry& e) { return !flags_where(e.lacks_cpu, true).empty(); };
  if (subnormals_flushed)
    for (const auto& e : entries)
      for (const auto& p : e.also)
        if (!excluded(e) && p.subnormals_flushed && p.matches(signature, lowering, true)) return &e;
  for (const auto& e : entries) {
    if (excluded(e)) continue;
    if (e.lowering.empty() && equal(e.signature)) return &e;
    for (const auto& p : e.also)
      if (p.exact() && equal(p.signature)) return &e;
  }
  for (const auto& e : entries) {
    if (excluded(e)) continue;
    if (!e.lowering.empty() && KnownPattern{e.signature, e.lowering}.matches(signature, lowering)) return &e;
    for (const auto& p : e.also)
      if (!p.exact() && p.matches(signature, lowering)) return &e;
  }
  return nullptr;
}

const KnownEntry* Ledger::match(const Finding& f) const {
  if (const KnownEntry* e = match(f.signature(), f.lowering, f.subnormals_flushed)) return e;
  // The form relation's finding is the library's forward in another exchange form (its lowering that form's):
  // an entry of the forward stage holds it too, and for a failure of that run one of the compile stage (the
  // other form's import crashing: seed 9941, OpenCV's CELU matcher).
  if (f.stage == Stage::Form) {
    for (const Stage s : {Stage::Forward, Stage::Compile}) {
      if (s == Stage::Compile && f.kind != Kind::Crash) continue;
      Finding forward = f;
      forward.stage = s;
      if (const KnownEntry* e = match(forward.signature(), f.lowering)) return e;
    }
  }
  if (!f.blames_reference() || f.against.empty()) return nullptr;
  const KnownEntry* first = nullptr;
  for (const auto& library : f.against) {
    Finding each = f;
    each.backend = library;
    const auto lowering = f.against_lowering.find(library);
    const KnownEntry* e =
        match(each.signature(), lowering == f.against_lowering.end() ? std::vector<std::string>{} : lowering->second);
    if (!e) return nullptr;
    if (!first) first = e;
  }
  return first;
}

const KnownEntry* Ledger::match_reduced(const std::string& signature, const std::string& known,
                                       const std::string& root_cause) const {
  if (!known.empty() && !signature_op(signature).empty()) return nullptr;
  const KnownEntry* e = match(root_cause);
  return e && e->id != known ? e : nullptr;
}

const KnownEntry* Ledger::find(const std::string& id) const {
  for (const auto& e : entries)
    if (e.id == id) return &e;
  return nullptr;
}

Ledger load_ledger(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot read the ledger");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_ledger(ss.str(), path);
}

namespace {
Ledger parse_ledger_json(const json& j, const std::string& path);
}  // namespace

Ledger parse_ledger(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw UserError(path + ": not JSON: " + e.what());
  }
  try {
    return parse_ledger_json(j, path);
  } catch (const json::exception& e) {  // a field of the wrong type the checks below do not name
    throw UserError(path + ": malformed ledger: " + e.what());
  }
}

namespace {
// Every field of `o` is one this build reads: a field it does not know (a ledger newer than the build, a
// typo) would otherwise be dropped silently, and a pattern whose condition is dropped covers more than it
// says (an `also` object's subnormals_flushed read by a build without it labels every finding it matches).
void known_fields(const json& o, std::initializer_list<const char*> fields, const std::string& where) {
  for (const auto& [key, value] : o.items()) {
    bool known = false;
    for (const char* f : fields) known = known || key == f;
    if (!known) throw UserError(where + ": unknown field '" + key + "' (a ledger newer than this build?)");
  }
}

Ledger parse_ledger_json(const json& j, const std::string& path) {
  if (!j.is_object() || j.value("format", "") != "quorum.known" || !j.contains("entries") ||
      !j.at("entries").is_array())
    throw UserError(path + ": expected {\"format\": \"quorum.known\", \"backend\": ..., \"entries\": [...]}");
  const std::string backend = str(j, "backend", path);
  Ledger l;
  std::set<std::string> ids;
  for (const auto& e : j.at("entries")) {
    KnownEntry k;
    k.file = path;
    k.id = str(e, "id", path + ": an entry");
    const std::string where = path + ": entry '" + k.id + "'";
    if (!ids.insert(k.id).second) throw UserError(where + ": duplicate id");
    known_fields(e, {"id", "backend", "class", "signature", "lowering", "note", "also", "link", "case", "agreement",
                     "needs_cpu", "lacks_cpu"},
                 where);
    k.backend = e.contains("backend") ? str(e, "backend", where) : backend;
    k.cls = str(e, "class", where);
    if (k.cls != "bug" && k.cls != "convention" && k.cls != "precision")
      throw UserError(where + ": class must be bug, convention or precision, got '" + k.cls + "'");
    k.signature = str(e, "signature", where);
    for (const auto& op : e.value("lowering", json::array())) {
      if (!op.is_string()) throw UserError(where + ": \"lowering\" lists library operations (strings)");
      k.lowering.push_back(op.get<std::string>());
    }
    k.note = str(e, "note", where);
    for (const auto& s : e.value("also", json::array())) {
      KnownPattern p;
      if (s.is_string()) {
        p.signature = s.get<std::string>();
      } else if (s.is_object() && s.contains("signature") && s.at("signature").is_string()) {
        known_fields(s, {"signature", "lowering", "subnormals_flushed"}, where + ": an \"also\" pattern");
        p.signature = s.at("signature").get<std::string>();
        const json& flushed = s.value("subnormals_flushed", json(false));
        if (!flushed.is_boolean())
          throw UserError(where + ": an \"also\" pattern's \"subnormals_flushed\" is true or false");
        p.subnormals_flushed = flushed.get<bool>();
        for (const auto& op : s.value("lowering", json::array())) {
          if (!op.is_string())
            throw UserError(where + ": an \"also\" pattern's \"lowering\" lists library operations (strings)");
          p.lowering.push_back(op.get<std::string>());
        }
      } else {
        throw UserError(where + ": \"also\" lists signatures (strings, '*' for any run of characters) or "
                        "{\"signature\": ..., \"lowering\": [library operations], \"subnormals_flushed\": true}");
      }
      k.also.push_back(std::move(p));
    }
    k.link = str(e, "link", where, false);
    for (auto [field, flags] : {std::pair{"needs_cpu", &k.needs_cpu}, std::pair{"lacks_cpu", &k.lacks_cpu}})
      for (const auto& f : e.value(field, json::array())) {
        if (!f.is_string())
          throw UserError(where + ": \"" + field + "\" lists CPU flags as /proc/cpuinfo names them");
        flags->push_back(f.get<std::string>());
      }
    if (e.contains("case") && !e.at("case").is_null()) {
      const json& c = e.at("case");
      k.has_case = true;
      k.mode = c.value("mode", std::string("infer"));
      if (k.mode != "infer" && k.mode != "train") throw UserError(where + ": case mode must be infer or train");
      if (!c.contains("model")) throw UserError(where + ": the case has no model");
      k.model = ir::graph_from_json(c.at("model").dump(), where);
      const json ins = c.value("inputs", json::object());
      for (const auto& [name, t] : ins.items()) k.inputs[name] = tensor(t, where + " input '" + name + "'");
      for (const auto& gi : k.model.inputs)
        if (!k.inputs.count(gi.name)) throw UserError(where + ": no value for graph input '" + gi.name + "'");
      if (c.contains("target")) k.target = tensor(c.at("target"), where + " target");
      k.loss = str(c, "loss", where + " case", false);
      const ops::OpSpec* loss = k.loss.empty() ? nullptr : ops::catalogue().find(k.loss);
      if (!k.loss.empty() && !(loss && loss->is_loss))
        throw UserError(where + ": the case's loss '" + k.loss + "' is not a loss of the catalogue");
    }
    const json waivers = e.value("agreement", json::array());
    for (const auto& w : waivers) {
      AgreementWaiver a;
      a.op = str(w, "op", where + " agreement");
      a.case_index = w.value("case", -1);
      const std::string stage = str(w, "stage", where + " agreement");
      const bool known_stage = stage == core::to_string(Stage::Forward) || stage == core::to_string(Stage::Loss) ||
                               stage == core::to_string(Stage::Backward);
      if (a.case_index < 0 || !known_stage)
        throw UserError(where + ": an agreement waiver is {\"op\", \"case\": N, \"stage\": FC|LC|BC}");
      a.stage = core::stage_from_string(stage);
      k.agreement.push_back(a);
    }
    l.entries.push_back(std::move(k));
  }
  return l;
}
}  // namespace

Ledger load_ledgers(const std::string& backends_dir) {
  namespace fs = std::filesystem;
  Ledger all;
  std::error_code ec;
  if (!fs::is_directory(backends_dir, ec))
    throw UserError(backends_dir + ": no such folder of ledgers (<backend>/known_differences.json)");
  std::vector<fs::path> files;
  for (const auto& d : fs::directory_iterator(backends_dir, ec)) {
    const fs::path f = d.path() / "known_differences.json";
    if (fs::exists(f)) files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    Ledger l = load_ledger(f.string());
    for (auto& e : l.entries) all.entries.push_back(std::move(e));
  }
  return all;
}

std::string default_ledger_dir() { return QUORUM_LEDGER_DIR; }

}  // namespace quorum::oracle
