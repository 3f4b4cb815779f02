// The faulty backend: the float64 reference with named planted faults, chosen by option, so tests
// can check that Quorum notices, classifies and survives each one. Options are FAULT[=ARG]:
//   crash-on-op=OP          SIGSEGV when running a node of operator OP
//   abort-on-attribute=A[:V] abort() at compile when a node has attribute A (equal to V if given)
//   hang-on-shape=D         never return from forward when any value has a dimension of size D
//   leak-until-oom          allocate until allocation fails (needs the worker's address-space limit)
//   leak-per-model=MIB      never free MIB MiB (touched, so resident) allocated at each compile
//   band=OP@LO..HI          OP's output elements whose operand (its first input, element for element;
//                           when the shapes differ, any element of it) lies in [LO, HI] are off by +1:
//                           a fault that fires only in a narrow interval, for the searches (docs/search.md)
//   floor=OP@V              OP's output elements below V are raised to V (an epsilon clamp meant for a later
//                           log left in the forward pass): with V under OP's float32 tolerance it moves the
//                           smallest outputs slightly, below what the per-node rule sees, while a trained
//                           classifier's near-one-hot outputs change their MAD to the ground truth (quorum detect)
//   batch-from=OP@N         OP's output is off by +0.5 everywhere when its axis 0 (the batch) is N or more: a
//                           kernel chosen for large batches that is wrong, which batches of 1 or 2 never reach
//   tail=OP@W               OP's output rows past the last full block of W (rows W*floor(B/W) .. B-1, B its
//                           axis 0) are off by +0.5 when B > W: a vector loop over the batch whose remainder is
//                           mishandled once a full block ran (a batch of B <= W is all remainder, and right)
//   last-tail=OP@W          the same along OP's output's last axis (positions W*floor(L/W) .. L-1 of every row,
//                           L its length): a vector loop along a row whose remainder is mishandled
//   inf-as-nan=OP           OP's output and its operand's gradient are NaN wherever its first operand (element for
//                           element) is +-inf: a formula evaluated as written (x * Phi(x) = -inf * 0) where the
//                           operator's limit is a number (gelu(-inf) = 0, hardswish(-inf) = 0, tanh(+-inf) = +-1)
//   momentum-twice          multi-step training: SGD's velocity decays twice per step
//                           (v = m * (m * v) + g): the first step is right, the second is not (docs/trained.md)
//   fuse-relu-into=OP       an optimizer fault: in the optimized run (CompileOptions::optimized) a relu whose
//                           input is an OP node's output that nothing else uses and no one asks for is "fused"
//                           into it, wrongly: negative values pass at half their size (leaky, alpha 0.5). The
//                           pinned run is right; the optimized session's lowering says "fused OP+relu"
//   opset-below=OP@N        a model reader's fault: faulty reads every model as if in its seeded exchange form
//                           (ir::seeded_form at opsets 11 to 17, its lowering "onnx opset K" per node, as the
//                           ONNX-reading backends say) and OP's output is off by +0.5 when K < N: an importer
//                           whose older-opset path is wrong, which the form relation finds where the model's own
//                           opset is N or more
//   refuse-op=OP            supports() says no to every node of operator OP, as a library that does not map
//                           it (repeatable): the campaign's per-backend counts and share policy are tested on it
// and the numeric faults of numeric_faults.cpp by name (e.g. relu-grad-at-zero), or all-numeric.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "backends/faulty/numeric_faults.h"
#include "backends/ref/ref_backend.h"
#include "core/error.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"

namespace quorum::backends {
namespace {

// The opsets opset-below reads models at (as ONNX Runtime's backend does).
constexpr int kFormOpsets[2] = {11, 17};

struct Faults {
  std::string crash_on_op;
  std::string abort_attr, abort_value;
  int64_t hang_dim = -1;
  bool leak = false;
  int64_t leak_per_model_mib = 0;
  bool momentum_twice = false;
  std::set<std::string> refused_ops;
  std::string fuse_relu_into;
  std::set<std::string> numeric;
  struct Band {
    std::string op;
    double lo = 0, hi = 0;
  };
  std::vector<Band> bands;
  struct Floor {
    std::string op;
    double value = 0;
  };
  std::vector<Floor> floors;
  struct Rows {  // batch-from=, tail= and last-tail=
    std::string op;
    int64_t n = 0;
    bool tail = false;
    bool last = false;  // along the last axis, not the batch
  };
  std::vector<Rows> rows;
  std::vector<Rows> opset_below;  // opset-below=OP@N (the op and N)
  std::set<std::string> inf_as_nan;
};

// "OP@N" of batch-from= and tail=.
Faults::Rows parse_rows(const std::string& name, const std::string& v) {
  const auto at = v.find('@');
  Faults::Rows r;
  r.tail = name == "tail" || name == "last-tail";
  r.last = name == "last-tail";
  try {
    if (at == std::string::npos || at == 0) throw std::invalid_argument(v);
    r.op = v.substr(0, at);
    size_t used = 0;
    r.n = std::stoll(v.substr(at + 1), &used);
    if (used != v.size() - at - 1 || r.n < 1) throw std::invalid_argument(v);
  } catch (const std::exception&) {
    throw core::UserError("faulty: " + name + "=OP@N expected (e.g. " + name + "=relu@8), got '" + name + "=" + v +
                          "'");
  }
  return r;
}

// What a planted fault does to an operator's outputs, after the operator (or the fault before it) ran.
using AfterForward = std::function<void(const ops::Inputs& in, std::vector<core::Tensor>& out)>;

// Wraps OP's forward in `ov` (the override already there, so faults of one operator stack, else the
// catalogue's kernel) with `after`. An operator no model holds is left alone.
void wrap_forward(ref::Overrides& ov, const std::string& op, AfterForward after) {
  const ops::OpSpec* spec = ops::catalogue().find(op);
  if (!spec) return;
  ops::ForwardFn inner = ov.forward.count(op) ? ov.forward[op] : spec->forward;
  ov.forward[op] = [inner, after](const ops::Inputs& in, const core::Attrs& a) {
    std::vector<core::Tensor> out = inner(in, a);
    if (!out.empty()) after(in, out);
    return out;
  };
}

// The batch-from and tail faults as forward overrides, on top of `ov`.
void add_rows(ref::Overrides& ov, const std::vector<Faults::Rows>& faults) {
  for (const auto& r : faults)
    wrap_forward(ov, r.op, [r](const ops::Inputs&, std::vector<core::Tensor>& out) {
      if (out[0].shape().empty() || out[0].numel() == 0) return;
      core::Tensor& y = out[0];
      // The axis's length b; each of `outer` runs along it holds b blocks of `per` elements.
      const int64_t b = r.last ? y.shape().back() : y.shape()[0], per = r.last ? 1 : y.numel() / b;
      const int64_t outer = r.last ? y.numel() / b : 1;
      int64_t from = b;  // the first wrong position
      if (!r.tail && b >= r.n) from = 0;
      if (r.tail && b > r.n && b % r.n) from = r.n * (b / r.n);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = from * per; i < b * per; ++i) y.f64()[o * b * per + i] += 0.5;
    });
}

// inf-as-nan: NaN at every element whose operand is infinite, in the forward and in the operand's gradient.
void add_inf_as_nan(ref::Overrides& ov, const std::set<std::string>& ops_named) {
  auto at_infinities = [](const core::Tensor& x, core::Tensor& y) {
    if (x.numel() != y.numel()) return;
    for (int64_t i = 0; i < y.numel(); ++i)
      if (std::isinf(x.get(i))) y.set(i, std::nan(""));
  };
  for (const auto& op : ops_named) {
    const ops::OpSpec* spec = ops::catalogue().find(op);
    if (!spec) continue;
    wrap_forward(ov, op, [at_infinities](const ops::Inputs& in, std::vector<core::Tensor>& out) {
      if (!in.empty()) at_infinities(*in[0], out[0]);
    });
    if (!spec->vjp) continue;
    ops::VjpFn inner = ov.vjp.count(op) ? ov.vjp[op] : spec->vjp;
    ov.vjp[op] = [inner, at_infinities](const ops::Inputs& in, const core::Attrs& a, const std::vector<core::Tensor>& y,
                                        const std::vector<core::Tensor>& gy) {
      std::vector<core::Tensor> gx = inner(in, a, y, gy);
      if (!in.empty() && !gx.empty() && gx[0].defined()) at_infinities(*in[0], gx[0]);
      return gx;
    };
  }
}

// "OP@V" of floor=.
Faults::Floor parse_floor(const std::string& v) {
  const auto at = v.find('@');
  Faults::Floor f;
  try {
    if (at == std::string::npos || at == 0) throw std::invalid_argument(v);
    f.op = v.substr(0, at);
    size_t used = 0;
    f.value = std::stod(v.substr(at + 1), &used);
    if (used != v.size() - at - 1) throw std::invalid_argument(v);
  } catch (const std::exception&) {
    throw core::UserError("faulty: floor=OP@V expected (e.g. floor=softmax@2e-7), got 'floor=" + v + "'");
  }
  return f;
}

// The floor faults as forward overrides, on top of `ov`.
void add_floors(ref::Overrides& ov, const std::vector<Faults::Floor>& floors) {
  for (const auto& fl : floors)
    wrap_forward(ov, fl.op, [fl](const ops::Inputs&, std::vector<core::Tensor>& out) {
      for (int64_t i = 0; i < out[0].numel(); ++i) out[0].f64()[i] = std::max(out[0].f64()[i], fl.value);
    });
}

// "OP@LO..HI" of band=.
Faults::Band parse_band(const std::string& v) {
  const auto at = v.find('@'), dots = v.find("..");
  Faults::Band b;
  try {
    if (at == std::string::npos || dots == std::string::npos || dots < at) throw std::invalid_argument(v);
    b.op = v.substr(0, at);
    b.lo = std::stod(v.substr(at + 1, dots - at - 1));
    b.hi = std::stod(v.substr(dots + 2));
  } catch (const std::exception&) {
    throw core::UserError("faulty: band=OP@LO..HI expected (e.g. band=tanh@2.5..2.6), got 'band=" + v + "'");
  }
  if (b.op.empty() || !(b.lo <= b.hi)) throw core::UserError("faulty: band=" + v + ": an operator and LO <= HI");
  return b;
}

// The band faults as forward overrides, on top of `ov` (a numeric fault of the same operator stays).
void add_bands(ref::Overrides& ov, const std::vector<Faults::Band>& bands) {
  for (const auto& b : bands)
    wrap_forward(ov, b.op, [b](const ops::Inputs& in, std::vector<core::Tensor>& out) {
      if (in.empty()) return;
      const core::Tensor& x = *in[0];
      core::Tensor& y = out[0];
      auto inside = [&](double v) { return v >= b.lo && v <= b.hi; };
      if (x.numel() == y.numel()) {
        for (int64_t i = 0; i < y.numel(); ++i)
          if (inside(x.f64()[i])) y.f64()[i] += 1.0;
      } else if (std::any_of(x.f64(), x.f64() + x.numel(), inside)) {
        for (int64_t i = 0; i < y.numel(); ++i) y.f64()[i] += 1.0;
      }
    });
}

Faults parse(const std::vector<std::string>& args) {
  Faults f;
  for (const auto& a : args) {
    const auto eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (name == "crash-on-op" && !value.empty()) {
      f.crash_on_op = value;
    } else if (name == "abort-on-attribute" && !value.empty()) {
      const auto colon = value.find(':');
      f.abort_attr = value.substr(0, colon);
      if (colon != std::string::npos) f.abort_value = value.substr(colon + 1);
    } else if (name == "hang-on-shape" && !value.empty()) {
      f.hang_dim = std::stoll(value);
    } else if (name == "leak-until-oom" && value.empty()) {
      f.leak = true;
    } else if (name == "leak-per-model" && !value.empty()) {
      f.leak_per_model_mib = std::stoll(value);
    } else if (name == "refuse-op" && !value.empty()) {
      f.refused_ops.insert(value);
    } else if (name == "momentum-twice" && value.empty()) {
      f.momentum_twice = true;
    } else if (name == "fuse-relu-into" && !value.empty()) {
      f.fuse_relu_into = value;
    } else if (name == "band" && !value.empty()) {
      f.bands.push_back(parse_band(value));
    } else if ((name == "batch-from" || name == "tail" || name == "last-tail") && !value.empty()) {
      f.rows.push_back(parse_rows(name, value));
    } else if (name == "opset-below" && !value.empty()) {
      f.opset_below.push_back(parse_rows(name, value));
    } else if (name == "inf-as-nan" && !value.empty()) {
      f.inf_as_nan.insert(value);
    } else if (name == "floor" && !value.empty()) {
      f.floors.push_back(parse_floor(value));
    } else if (name == "all-numeric" && value.empty()) {
      for (const auto& nf : faulty::numeric_faults()) f.numeric.insert(nf.name);
    } else if (value.empty() && std::any_of(faulty::numeric_faults().begin(), faulty::numeric_faults().end(),
                                            [&](const auto& nf) { return nf.name == name; })) {
      f.numeric.insert(name);
    } else {
      throw core::UserError(
          "faulty: unknown fault '" + a +
          "' (crash-on-op=OP, abort-on-attribute=A[:V], hang-on-shape=D, leak-until-oom, leak-per-model=MIB, "
          "refuse-op=OP, fuse-relu-into=OP, band=OP@LO..HI, floor=OP@V, batch-from=OP@N, tail=OP@W, "
          "last-tail=OP@W, inf-as-nan=OP, opset-below=OP@N, momentum-twice, all-numeric or a numeric fault)");
    }
  }
  return f;
}

[[noreturn]] void leak_until_oom() {
  rlimit as{};
  ::getrlimit(RLIMIT_AS, &as);
  if (as.rlim_cur == RLIM_INFINITY)
    throw std::runtime_error("leak-until-oom refuses to run without an address-space limit");
  std::vector<char*> chunks;
  for (;;) {
    char* p = new char[64 << 20];  // throws std::bad_alloc at the limit
    std::memset(p, 1, 64 << 20);
    chunks.push_back(p);
  }
}

// The relu nodes fuse-relu-into fuses in `g`: fed by an `op` node's output that is no graph output and has
// no other consumer.
std::vector<const ir::Node*> fusable_relus(const ir::Graph& g, const std::string& op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes) {
    if (n.op != "relu" || n.inputs.empty()) continue;
    const ir::Node* p = g.producer(n.inputs[0]);
    if (!p || p->op != op || std::find(g.outputs.begin(), g.outputs.end(), n.inputs[0]) != g.outputs.end()) continue;
    int uses = 0;
    for (const auto& m : g.nodes) uses += static_cast<int>(std::count(m.inputs.begin(), m.inputs.end(), n.inputs[0]));
    if (uses == 1) out.push_back(&n);
  }
  return out;
}

class FaultySession : public Session {
 public:
  FaultySession(std::unique_ptr<Session> inner, const ir::Graph& g, Faults f,
                std::map<std::string, std::vector<std::string>> fused = {})
      : inner_(std::move(inner)), g_(g), f_(std::move(f)), fused_(std::move(fused)) {}

  std::map<std::string, std::vector<std::string>> lowering() const override { return fused_; }

  ValueMap forward(const ValueMap& inputs, bool keep) override {
    before_run();
    return inner_->forward(inputs, keep);
  }
  TrainResult train_step(const TrainRequest& req) override {
    before_run();
    return inner_->train_step(req);
  }
  // Multi-step training: the shared optimizer on the reference's gradients (Session's default), with
  // momentum-twice decaying the velocity once more before each step.
  StepResult optimizer_step(const TrainRequest& req, const OptimizerSpec& spec) override {
    if (f_.momentum_twice && optimizer_ && optimizer_->spec() == spec && spec.name == "sgd")
      for (auto& [name, slot] : optimizer_->slots())
        for (int64_t i = 0; i < slot.first.numel(); ++i) slot.first.set(i, spec.momentum * slot.first.get(i));
    return Session::optimizer_step(req, spec);
  }
  ValueMap weights() const override { return inner_->weights(); }
  void set_weights(const ValueMap& w) override { inner_->set_weights(w); }

 private:
  void before_run() {
    for (const auto& n : g_.nodes)
      if (n.op == f_.crash_on_op) {
        std::fprintf(stderr, "faulty: crashing in node '%s' (%s)\n", n.name.c_str(), n.op.c_str());
        std::fflush(stderr);
        ::raise(SIGSEGV);
      }
    if (f_.hang_dim >= 0)
      for (const auto& [name, t] : g_.types)
        if (std::find(t.shape.begin(), t.shape.end(), f_.hang_dim) != t.shape.end())
          for (;;) ::pause();
    if (f_.leak) leak_until_oom();
  }
  std::unique_ptr<Session> inner_;
  ir::Graph g_;
  Faults f_;
  // The optimized run's "fused ..." entries; opset-below's "onnx opset K".
  std::map<std::string, std::vector<std::string>> fused_;
};

class FaultyBackend : public Backend {
 public:
  explicit FaultyBackend(Faults f) : ref_(make_ref_backend()), f_(std::move(f)) {}
  std::string name() const override { return "faulty"; }
  std::string version() const override { return ref_->version() + " with planted faults"; }
  bool trains() const override { return true; }
  // Only with the planted optimizer fault: the reference has no optimizer.
  bool optimizes() const override { return !f_.fuse_relu_into.empty(); }
  // Only with the planted reader fault.
  bool reads_exchange_form() const override { return !f_.opset_below.empty(); }
  Support supports(const ir::Graph& g, const ir::Node& n) const override {
    if (f_.refused_ops.count(n.op)) return Support::no("refuse-op: faulty does not map " + n.op);
    return ref_->supports(g, n);
  }
  std::unique_ptr<Session> compile(const ir::Graph& g, const CompileOptions& opt) override {
    if (!f_.abort_attr.empty())
      for (const auto& n : g.nodes) {
        auto it = n.attrs.find(f_.abort_attr);
        if (it != n.attrs.end() && (f_.abort_value.empty() || core::to_string(it->second) == f_.abort_value)) {
          std::fprintf(stderr, "faulty: assertion failed in node '%s': attribute %s=%s\n", n.name.c_str(),
                       f_.abort_attr.c_str(), core::to_string(it->second).c_str());
          std::fflush(stderr);
          std::abort();
        }
      }
    if (f_.leak_per_model_mib > 0) {  // a library that keeps something of every model it compiles
      char* p = new char[static_cast<size_t>(f_.leak_per_model_mib) << 20];
      std::memset(p, 1, static_cast<size_t>(f_.leak_per_model_mib) << 20);
      leaked_.push_back(p);
    }
    ref::Overrides ov = faulty::numeric_overrides(f_.numeric);
    add_bands(ov, f_.bands);
    add_floors(ov, f_.floors);
    add_rows(ov, f_.rows);
    add_inf_as_nan(ov, f_.inf_as_nan);
    std::map<std::string, std::vector<std::string>> read;  // opset-below: the opset each node was read at
    if (!f_.opset_below.empty()) {
      const int opset = ir::seeded_form(g, kFormOpsets[0], kFormOpsets[1]).opset;
      for (const auto& n : g.nodes) read[n.name].push_back("onnx opset " + std::to_string(opset));
      for (const auto& r : f_.opset_below)
        if (opset < r.n)
          wrap_forward(ov, r.op, [](const ops::Inputs&, std::vector<core::Tensor>& out) {
            for (int64_t i = 0; i < out[0].numel(); ++i) out[0].f64()[i] += 0.5;
          });
    }
    if (opt.optimized && !f_.fuse_relu_into.empty()) {
      ir::Graph fused = g;
      std::map<std::string, std::vector<std::string>> lowering;
      for (const ir::Node* r : fusable_relus(g, f_.fuse_relu_into)) {
        for (auto& n : fused.nodes)
          if (n.name == r->name) n.op = "leaky_relu", n.attrs = {{"alpha", 0.5}};
        const std::string entry = kFusedPrefix + f_.fuse_relu_into + "+relu";
        lowering[r->name].push_back(entry);
        lowering[g.producer(r->inputs[0])->name].push_back(entry);
      }
      return std::make_unique<FaultySession>(make_ref_session(fused, std::move(ov)), g, f_, std::move(lowering));
    }
    return std::make_unique<FaultySession>(make_ref_session(g, std::move(ov)), g, f_, std::move(read));
  }

 private:
  std::unique_ptr<Backend> ref_;
  Faults f_;
  std::vector<char*> leaked_;
};

}  // namespace

std::unique_ptr<Backend> create_backend(const std::vector<std::string>& args) {
  return std::make_unique<FaultyBackend>(parse(args));
}

}  // namespace quorum::backends
