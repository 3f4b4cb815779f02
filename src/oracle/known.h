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
#include "oracle/oracle.h"

namespace quorum::oracle {

// One sampled case of the backend agreement test that an entry explains: operator, case index,
// stage (FC: forward, LC: loss or its gradient, BC: gradients and the SGD step).
struct AgreementWaiver {
  std::string op;
  int case_index = 0;
  core::Stage stage = core::Stage::Forward;  // Forward, Loss or Backward ("FC", "LC", "BC" in the ledger)
};

// Another form of an entry's root cause. `signature` may hold '*', which matches any run of
// characters (every operator, every parameter, a message's variable part); `lowering`, when given,
// names library operations (backends::Session::lowering) one of which the finding's node must have
// run, '*' as in signatures: the same primitive behind several operators ("nan-swallowed|FC|onednn|*"
// with eltwise_relu covers relu and leaky_relu, and any operator a backend builds on it later), or
// the exchange form an importer read ("onnx form gemm=gemm_pretransposed*").
// `subnormals_flushed`, when set, matches only a finding the kernel explains with the operands' subnormals
// read as zeros (Finding::subnormals_flushed): a library that computes in denormals-are-zero mode is wrong
// that way in every operator, and the pattern may name them all ("inconsistency|FC|opencv|*") without
// covering any other inconsistency of theirs. Such patterns are tried before every other.
struct KnownPattern {
  std::string signature;
  std::vector<std::string> lowering;
  bool subnormals_flushed = false;
  bool exact() const {
    return lowering.empty() && !subnormals_flushed && signature.find('*') == std::string::npos;
  }
  // `signature` is the finding's, the backend's options included: a pattern whose backend field names
  // options holds only for a backend run with them (they choose another library path: an instruction set,
  // a quantized engine); one without options holds for the backend under any options.
  bool matches(const std::string& signature, const std::vector<std::string>& node_lowering,
               bool flushed = false) const;
  std::string str() const;  // for people: the signature, and "when the node ran ..." where given
};

struct KnownEntry {
  std::string id;
  std::string backend;    // the backend spec the case runs on ("onednn", "faulty:relu-nan-to-zero")
  std::string cls;        // "bug", "convention" or "precision"
  std::string signature;  // the finding the case produces
  // Where given, the library operations (or exchange form) the finding's node must have run for the
  // signature to be this entry's, as in KnownPattern: a signature as general as any dense inconsistency
  // of a library is then this entry's only in that form ("onnx form gemm=gemm_scaled*").
  std::vector<std::string> lowering;
  // Other forms of the same root cause (the same defect seen through sibling operators, e.g. relu6
  // and clip beside relu, or every operator built on one primitive): campaign findings matching one
  // are labelled with this entry too.
  std::vector<KnownPattern> also;
  std::string note, link;
  bool has_case = false;
  std::string mode = "infer";  // infer | train
  ir::Graph model;
  backends::ValueMap inputs;   // float64 values
  core::Tensor target;         // train mode; empty = drawn as campaigns draw it
  std::string loss;            // train mode: the loss the case trains with; empty = the default (mse_loss)
  std::vector<AgreementWaiver> agreement;
  // The CPU features (as /proc/cpuinfo's flags name them) without which the case does not show: a library
  // whose kernels are picked by instruction set (oneDNN's lrn_jit:avx512_core, ONNX Runtime's AVX-512 max
  // pooling) runs another implementation elsewhere. `known --check` says so on a CPU that lacks one.
  std::vector<std::string> needs_cpu;
  // The CPU features with any of which the case does not show: a kernel the library picks only where the CPU
  // lacks them (u8 x s8 products summed in int16 pairs without VNNI). On a CPU that has one the entry labels
  // no finding, `known --check` says "not here", and the agreement tests apply none of its waivers.
  std::vector<std::string> lacks_cpu;
  std::string file;  // the ledger it came from
  // Why this machine's CPU is not one the case shows on: "" when it has every needs_cpu feature and no
  // lacks_cpu one; else "needs F1, F2; here MODEL, without F2" or "needs a CPU without F1, F2; here MODEL,
  // with F1".
  std::string cpu_unmet() const;
};

struct Ledger {
  std::vector<KnownEntry> entries;
  // The entry a finding belongs to (backend options as in KnownPattern::matches), or null: first an entry
  // whose signature (without a lowering) or exact `also` signature equals the finding's, then the first whose pattern
  // (an entry's signature with its lowering, or an `also` pattern) matches it (with `lowering`, the
  // library operations the finding's node ran).
  const KnownEntry* match(const std::string& signature, const std::vector<std::string>& lowering = {},
                          bool subnormals_flushed = false) const;
  // A finding's entry: its signature and lowering as above; for a finding blamed on the reference
  // because every library differs from the kernel alike, the entry of the first of them when each
  // of them has a known bug with that finding's signature (libraries that share the faulty code:
  // libtorch's float32 gelu backward is oneDNN's). A form-relation finding (stage FR: the library's forward
  // of the model read in another exchange form, its lowering that form's) also belongs to an entry of its
  // forward stage (FC), so a known importer bug the other form reaches keeps its entry.
  const KnownEntry* match(const Finding& f) const;
  const KnownEntry* find(const std::string& id) const;
  // The entry a finding belongs to through its reduced case (`root_cause`, the key of that case), where it is not
  // already `known`'s: for a finding the ledger did not know (a node failing on the wrong shape an upstream node
  // gave it is the upstream node's entry), and for a crash naming no node whatever it matched (a library dying
  // while it builds the model: its signature is every such crash's, its reduced case names the operator). Null
  // when the reduced case matches no entry or the one it already has.
  const KnownEntry* match_reduced(const std::string& signature, const std::string& known,
                                  const std::string& root_cause) const;
};

// "kind|stage|backend:opts|op|params" -> the same with the backend's base name.
std::string base_signature(const std::string& signature);
// The operator field of a signature ("" for a crash blamed on no node, or a malformed signature).
std::string signature_op(const std::string& signature);

// One ledger file; UserError naming the file and entry on anything malformed.
Ledger load_ledger(const std::string& path);
// The same from the file's text (`path` names it in errors).
Ledger parse_ledger(const std::string& text, const std::string& path);
// Every backends/<name>/known_differences.json under `backends_dir` (missing files are empty).
Ledger load_ledgers(const std::string& backends_dir);
// Where this build's ledgers are (the source tree's src/backends).
std::string default_ledger_dir();

}  // namespace quorum::oracle
