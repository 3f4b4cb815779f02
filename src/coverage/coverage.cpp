// Operator-level and functionality coverage.
#include "coverage/coverage.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "ops/registry.h"

namespace quorum::coverage {

void parse_weights(const std::string& text, CoverageOptions& opt) {
  std::vector<double> w;
  std::stringstream in(text);
  const std::string bad = "--olc_weights: expected five numbers >= 0 (OTC,IDC,ODC,SEC,SPC), not all 0, got '" +
                          text + "'";
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    double d = -1;
    try {
      d = std::stod(item, &used);
    } catch (const std::exception&) {
      throw core::UserError(bad);
    }
    if (used != item.size() || !(d >= 0) || d > 1e9) throw core::UserError(bad);
    w.push_back(d);
  }
  if (w.size() != 5 || w[0] + w[1] + w[2] + w[3] + w[4] <= 0) throw core::UserError(bad);
  opt.w_otc = w[0];
  opt.w_idc = w[1];
  opt.w_odc = w[2];
  opt.w_sec = w[3];
  opt.w_spc = w[4];
}

namespace {
constexpr std::pair<FactKind, const char*> kFactKinds[] = {
    {FactKind::Form, "form"}, {FactKind::Fused, "fused"}, {FactKind::In, "in"},   {FactKind::Maps, "maps"},
    {FactKind::Op, "op"},     {FactKind::Opset, "opset"}, {FactKind::Out, "out"}, {FactKind::Ran, "ran"},
    {FactKind::Spc, "spc"},   {FactKind::Succ, "succ"}};
}  // namespace

const char* to_string(FactKind k) {
  for (const auto& [kind, name] : kFactKinds)
    if (kind == k) return name;
  return "?";
}

std::optional<FactKind> fact_kind_from_string(const std::string& s) {
  for (const auto& [kind, name] : kFactKinds)
    if (s == name) return kind;
  return std::nullopt;
}

bool backend_fact(FactKind k) {
  return k == FactKind::Maps || k == FactKind::Ran || k == FactKind::Form || k == FactKind::Opset ||
         k == FactKind::Fused;
}

const std::vector<std::string>& operator_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> v;
    for (const ops::OpSpec* s : ops::catalogue().all())
      if (!s->is_loss && !s->is_quantized) v.push_back(s->name);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return types;
}

std::vector<int> allowed_in_degrees(const std::string& op) {
  const ops::OpSpec& s = ops::op(op);
  const int hi = s.max_inputs == ops::kUnbounded ? kMaxDegree : std::min(s.max_inputs, kMaxDegree);
  std::vector<int> v;
  for (int d = std::min(s.min_inputs, hi); d <= hi; ++d) v.push_back(d);
  return v;
}

namespace {

constexpr int kOutAllowed = kMaxDegree;  // out-degrees 1, 2, 3 and 4 or more

// 64-bit FNV-1a, in hex: a shape-and-parameter vector's key.
std::string digest(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

core::TensorType type_of(const ir::Graph& g, const std::string& v) {
  if (auto t = g.types.find(v); t != g.types.end()) return t->second;
  for (const auto& in : g.inputs)
    if (in.name == v) return in.type;
  if (auto i = g.initializers.find(v); i != g.initializers.end()) return {i->second.dtype(), i->second.shape()};
  return {};
}

Parts weighted(const CoverageOptions& o, Parts p) {
  const double w = o.w_otc + o.w_idc + o.w_odc + o.w_sec + o.w_spc;
  p.olc = w > 0 ? (o.w_otc * p.otc + o.w_idc * p.idc + o.w_odc * p.odc + o.w_sec * p.sec + o.w_spc * p.spc) / w : 0;
  return p;
}

std::string pct(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << 100.0 * v;
  return os.str();
}

}  // namespace

std::vector<Fact> model_facts(const ir::Graph& g, int64_t model) {
  std::map<std::string, std::vector<const ir::Node*>> readers;  // value -> nodes reading it
  for (const auto& n : g.nodes)
    for (size_t i = 0; i < ir::data_input_count(n); ++i) readers[n.inputs[i]].push_back(&n);
  std::vector<Fact> out;
  auto fact = [&](const std::string& op, FactKind kind, std::string value) {
    out.push_back({op, kind, std::move(value), model});
  };
  for (const auto& n : g.nodes) {
    const ops::OpSpec* spec = ops::catalogue().find(n.op);
    if (!spec || spec->is_loss) continue;
    fact(n.op, FactKind::Op, "");
    const size_t nd = ir::data_input_count(n);
    fact(n.op, FactKind::In, std::to_string(std::min<size_t>(nd, kMaxDegree)));
    std::set<const ir::Node*> succ;
    int out_degree = 0;
    for (const auto& o : n.outputs) {
      if (std::find(g.outputs.begin(), g.outputs.end(), o) != g.outputs.end()) ++out_degree;
      if (auto r = readers.find(o); r != readers.end())
        for (const ir::Node* s : r->second) succ.insert(s);
    }
    out_degree += static_cast<int>(succ.size());
    if (out_degree > 0) fact(n.op, FactKind::Out, std::to_string(std::min(out_degree, kMaxDegree)));
    std::set<std::string> succ_ops;
    for (const ir::Node* s : succ) succ_ops.insert(s->op);
    for (const auto& s : succ_ops) fact(n.op, FactKind::Succ, s);
    // The shape-and-parameter vector: data-input types, then every attribute (defaults filled).
    std::string key;
    for (size_t i = 0; i < nd; ++i) {
      const core::TensorType t = type_of(g, n.inputs[i]);
      key += core::to_string(t.dtype) + core::to_string(t.shape) + ";";
    }
    core::Attrs attrs = n.attrs;
    for (const auto& a : spec->attrs)
      if (!attrs.count(a.name)) attrs[a.name] = a.default_value;
    key += core::to_string(attrs);
    fact(n.op, FactKind::Spc, digest(key));
  }
  return out;
}

Coverage::Coverage(CoverageOptions opt) : opt_(opt) {}

bool Coverage::add_locked(const Fact& f) {
  const auto key = std::make_tuple(f.subject, f.kind, f.value);
  if (f.kind == FactKind::Fused) {  // counted: every one is passed on
    fused_[f.subject][f.value] += f.models;
    auto [it, fresh] = first_.emplace(key, f.model);
    if (!fresh) it->second = std::min(it->second, f.model);
    return true;
  }
  if (auto it = first_.find(key); it != first_.end()) {
    it->second = std::min(it->second, f.model);
    return false;
  }
  if (f.kind == FactKind::Maps || f.kind == FactKind::Ran) {
    auto& b = backends_[f.subject];
    (f.kind == FactKind::Maps ? b.first : b.second).insert(f.value);
  } else if (f.kind == FactKind::Form) {
    forms_[f.subject].insert(f.value);
  } else if (f.kind == FactKind::Opset) {
    opsets_[f.subject].insert(std::stoi(f.value));
  } else {
    Op& o = ops_[f.subject];
    if (f.kind == FactKind::Op) o.used = true;
    else if (f.kind == FactKind::In) o.in.insert(std::stoi(f.value));
    else if (f.kind == FactKind::Out) o.out.insert(std::stoi(f.value));
    else if (f.kind == FactKind::Succ) o.succ.insert(f.value);
    else {  // FactKind::Spc
      if (static_cast<int64_t>(o.spc.size()) >= opt_.n_maxspc) return false;
      o.spc.insert(f.value);
    }
  }
  first_.emplace(key, f.model);
  return true;
}

std::vector<Fact> Coverage::add(const std::vector<Fact>& facts) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Fact> fresh;
  for (const Fact& f : facts)
    if (add_locked(f)) fresh.push_back(f);
  return fresh;
}

size_t Coverage::gain(const ir::Graph& g) const {
  const std::vector<Fact> facts = model_facts(g);
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::tuple<std::string, FactKind, std::string>> seen;
  std::map<std::string, int64_t> spc_new;
  size_t n = 0;
  for (const Fact& f : facts) {
    const auto key = std::make_tuple(f.subject, f.kind, f.value);
    if (first_.count(key) || !seen.insert(key).second) continue;
    if (f.kind == FactKind::Spc) {
      const auto it = ops_.find(f.subject);
      const int64_t have = (it == ops_.end() ? 0 : static_cast<int64_t>(it->second.spc.size())) + spc_new[f.subject];
      if (have >= opt_.n_maxspc) continue;
      ++spc_new[f.subject];
    }
    ++n;
  }
  return n;
}

bool Coverage::has_successor(const std::string& op, const std::string& successor) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = ops_.find(op);
  return it != ops_.end() && it->second.succ.count(successor);
}

OpCoverage Coverage::op_locked(const std::string& op) const {
  OpCoverage c;
  c.op = op;
  const std::vector<int> allowed = allowed_in_degrees(op);
  c.in_allowed = static_cast<int>(allowed.size());
  c.out_allowed = kOutAllowed;
  c.succ_allowed = static_cast<int>(operator_types().size());
  if (auto it = ops_.find(op); it != ops_.end()) {
    const Op& o = it->second;
    c.used = o.used;
    for (int d : o.in) c.in_seen += std::count(allowed.begin(), allowed.end(), d) ? 1 : 0;
    c.out_seen = static_cast<int>(o.out.size());
    c.succ_seen = static_cast<int>(o.succ.size());
    c.spc_seen = static_cast<int64_t>(o.spc.size());
  }
  c.parts.otc = c.used ? 1 : 0;
  c.parts.idc = c.in_allowed ? static_cast<double>(c.in_seen) / c.in_allowed : 0;
  c.parts.odc = static_cast<double>(std::min(c.out_seen, c.out_allowed)) / c.out_allowed;
  c.parts.sec = c.succ_allowed ? static_cast<double>(std::min(c.succ_seen, c.succ_allowed)) / c.succ_allowed : 0;
  c.parts.spc = opt_.n_maxspc > 0 ? std::min(1.0, static_cast<double>(c.spc_seen) / opt_.n_maxspc) : 1;
  c.parts = weighted(opt_, c.parts);
  return c;
}

double Coverage::op_coverage(const std::string& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  return op_locked(op).parts.olc;
}

std::vector<OpCoverage> Coverage::per_op() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OpCoverage> v;
  for (const auto& op : operator_types()) v.push_back(op_locked(op));
  return v;
}

Parts Coverage::parts() const {
  const std::vector<OpCoverage> all = per_op();
  Parts p;
  for (const auto& c : all) {
    p.otc += c.parts.otc;
    p.idc += c.parts.idc;
    p.odc += c.parts.odc;
    p.sec += c.parts.sec;
    p.spc += c.parts.spc;
  }
  const double n = static_cast<double>(std::max<size_t>(all.size(), 1));
  p.otc /= n;
  p.idc /= n;
  p.odc /= n;
  p.sec /= n;
  p.spc /= n;
  return weighted(opt_, p);
}

std::vector<Functionality> Coverage::functionality() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Functionality> v;
  for (const auto& [backend, sets] : backends_) {
    Functionality f;
    f.backend = backend;
    f.mapped = static_cast<int>(sets.first.size());
    for (const auto& op : sets.first) {
      if (sets.second.count(op)) ++f.invoked;
      else f.uncovered.push_back(op);
    }
    if (auto it = forms_.find(backend); it != forms_.end()) f.forms.assign(it->second.begin(), it->second.end());
    if (auto it = opsets_.find(backend); it != opsets_.end()) f.opsets.assign(it->second.begin(), it->second.end());
    if (auto it = fused_.find(backend); it != fused_.end()) f.fused.assign(it->second.begin(), it->second.end());
    v.push_back(std::move(f));
  }
  return v;
}

std::string missing_opsets(const std::vector<int>& seen, int lo, int hi) {
  std::string s;
  for (int o = lo; o <= hi; ++o)
    if (std::find(seen.begin(), seen.end(), o) == seen.end()) s += (s.empty() ? "" : ", ") + std::to_string(o);
  return s;
}

std::vector<Fact> Coverage::facts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Fact> v;
  for (const auto& [key, model] : first_) v.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), model});
  std::stable_sort(v.begin(), v.end(), [](const Fact& a, const Fact& b) { return a.model < b.model; });
  return v;
}

size_t Coverage::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_.size();
}

std::vector<std::pair<int64_t, Parts>> coverage_curve(const std::vector<Fact>& facts, const CoverageOptions& opt,
                                                      int points) {
  std::vector<Fact> sorted;
  for (const Fact& f : facts)
    if (!backend_fact(f.kind)) sorted.push_back(f);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Fact& a, const Fact& b) { return a.model < b.model; });
  std::vector<std::pair<int64_t, Parts>> curve;
  if (sorted.empty()) return curve;
  const int64_t lo = std::max<int64_t>(sorted.front().model, 0), hi = std::max(sorted.back().model, lo);
  const int64_t step = std::max<int64_t>(1, (hi - lo + 1 + points - 1) / std::max(points, 1));
  Coverage c(opt);
  size_t i = 0;
  for (int64_t x = lo;; x = std::min(x + step, hi)) {
    std::vector<Fact> batch;
    for (; i < sorted.size() && sorted[i].model <= x; ++i) batch.push_back(sorted[i]);
    c.add(batch);
    curve.emplace_back(x + 1, c.parts());  // after x + 1 models
    if (x == hi) break;
  }
  return curve;
}

std::string parts_line(const Parts& p) {
  return "OLC " + pct(p.olc) + "% (OTC " + pct(p.otc) + " IDC " + pct(p.idc) + " ODC " + pct(p.odc) + " SEC " +
         pct(p.sec) + " SPC " + pct(p.spc) + ")";
}

std::string coverage_text(const Coverage& c, const std::vector<std::string>& ops) {
  std::ostringstream os;
  const Parts p = c.parts();
  const CoverageOptions& o = c.options();
  os << "operator-level coverage over " << operator_types().size() << " operator types (n_maxspc "
     << o.n_maxspc << ", weights " << o.w_otc << "," << o.w_idc << "," << o.w_odc << "," << o.w_sec << ","
     << o.w_spc << "):\n"
     << "  OTC " << std::setw(6) << pct(p.otc) << "%  operator types used\n"
     << "  IDC " << std::setw(6) << pct(p.idc) << "%  in-degrees seen / allowed\n"
     << "  ODC " << std::setw(6) << pct(p.odc) << "%  out-degrees seen / " << kMaxDegree << " (1 .. "
     << kMaxDegree << " or more)\n"
     << "  SEC " << std::setw(6) << pct(p.sec) << "%  successor types seen / " << operator_types().size() << "\n"
     << "  SPC " << std::setw(6) << pct(p.spc) << "%  shape-and-parameter vectors seen / n_maxspc\n"
     << "  OLC " << std::setw(6) << pct(p.olc) << "%  weighted mean\n";
  const auto per = c.per_op();
  std::vector<std::string> unused;
  for (const auto& oc : per)
    if (!oc.used) unused.push_back(oc.op);
  if (!unused.empty()) {
    os << "operator types never used (" << unused.size() << "):";
    for (const auto& u : unused) os << " " << u;
    os << "\n";
  }
  const auto fn = c.functionality();
  if (!fn.empty()) os << "functionality coverage (operators and losses a backend maps, invoked on it):\n";
  for (const auto& f : fn) {
    os << "  " << std::left << std::setw(16) << f.backend << std::right << std::setw(6) << pct(f.share()) << "%  "
       << f.invoked << "/" << f.mapped;
    if (!f.uncovered.empty()) {
      os << "  never invoked:";
      for (const auto& u : f.uncovered) os << " " << u;
    }
    os << "\n";
    if (!f.opsets.empty()) {
      os << "  " << std::left << std::setw(16) << "" << std::right << "ONNX read: opsets";
      for (int o : f.opsets) os << " " << o;
      os << ", " << f.forms.size() << " exchange forms:";
      for (const auto& x : f.forms) os << " " << x << ";";
      os << "\n";
    }
    if (!f.fused.empty()) {
      os << "  " << std::left << std::setw(16) << "" << std::right << "optimizer, " << f.fused.size() << " kinds seen:";
      for (const auto& [x, models] : f.fused) os << " " << x << " (" << models << " models);";
      os << "\n";
    }
  }
  if (ops.empty()) return os.str();
  const bool all = std::find(ops.begin(), ops.end(), "all") != ops.end();
  os << std::left << std::setw(22) << "operator" << std::right << std::setw(7) << "OLC" << std::setw(8) << "in"
     << std::setw(8) << "out" << std::setw(8) << "succ" << std::setw(10) << "spc" << "\n";
  for (const auto& oc : per) {
    if (!all && std::find(ops.begin(), ops.end(), oc.op) == ops.end()) continue;
    os << std::left << std::setw(22) << oc.op << std::right << std::setw(6) << pct(oc.parts.olc) << "%"
       << std::setw(8) << (std::to_string(oc.in_seen) + "/" + std::to_string(oc.in_allowed)) << std::setw(8)
       << (std::to_string(std::min(oc.out_seen, oc.out_allowed)) + "/" + std::to_string(oc.out_allowed))
       << std::setw(8) << (std::to_string(oc.succ_seen) + "/" + std::to_string(oc.succ_allowed)) << std::setw(10)
       << (std::to_string(oc.spc_seen) + "/" + std::to_string(o.n_maxspc)) << "\n";
  }
  return os.str();
}

}  // namespace quorum::coverage
