// What a finding is, as one vocabulary from the oracle's verdict to the store, bundles, the
// classifier, the reproducer writers and the reports: its kind and the stage it shows in, each with
// its one text form (finding.json, the store, signatures). Adding a kind is one entry in
// finding_kind.cpp's table plus what is specific to it (docs/ARCHITECTURE.md, "Adding a finding kind").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace quorum::core {

// Inconsistency: numbers beyond the tolerance. NaN: a library produced NaN/Inf where the float64
// kernel on its inputs is finite. Crash: a library failed (signal, timeout, error) where another ran.
// NaNSwallowed: the kernel propagates a NaN (NaN in, NaN out) and the library returned a number.
// Detection: CRADLE's detection on a trained model over a validation set (src/detect/, quorum detect):
// a pair of backends whose predictions differ beyond the class or MAD distance's threshold; its
// message names the metric and the other backend, its bundle holds the most inconsistent input.
enum class FindingKind : uint8_t { Inconsistency, NaN, Crash, NaNSwallowed, Detection };

// Where a finding shows: building the model (compile), its forward outputs (FC), the loss (LC), the
// gradients (BC), or the optimized run (OC: the model compiled with only its graph outputs asked for, the
// library's optimizer free to fuse and fold, judged end to end against the reference and the library's own
// pinned run), or the batch relation (BR: the model's sample evaluated again inside a larger batch by the same
// library, judged against its own run of the sample and the reference), the form relation (FR: the model read in
// another exchange form) or the position relation (PR: the model's values placed at a drawn offset of a longer
// axis, judged where they decide the result alone).
enum class Stage : uint8_t { Compile, Forward, Loss, Backward, Optimized, Batch, Form, Position };
// The stages judged end to end on a second run of the model by the same library (OC, BR, FR, PR).
inline bool second_run_stage(Stage s) {
  return s == Stage::Optimized || s == Stage::Batch || s == Stage::Form || s == Stage::Position;
}

// What, beside kind, stage, backend and operator, tells two root causes of a kind apart in a
// signature: the node's categorical attributes, the failure's (normalised) message, or nothing.
enum class SignatureBy : uint8_t { Params, Message, Operator };

struct FindingKindInfo {
  FindingKind kind;
  const char* name;        // the text form: "inconsistency", "nan", "crash", "nan-swallowed", "detection"
  SignatureBy signature;   // the key's last field
  bool numeric;            // judged on numbers (a kernel re-run applies); false for failures
  const char* what;        // an issue title's predicate after the operator ("" for a crash: its message)
};

// Every kind, in the order progress lines and summaries list them.
const std::vector<FindingKindInfo>& finding_kinds();
const FindingKindInfo& info(FindingKind k);
const char* to_string(FindingKind k);
// UserError naming the text when it is no kind (a store or bundle written by something else).
FindingKind finding_kind_from_string(const std::string& s);

const char* to_string(Stage s);  // "compile", "FC", "LC", "BC", "OC", "BR", "FR", "PR"
Stage stage_from_string(const std::string& s);  // UserError otherwise
// The loss or the gradients: the stages a training run judges.
inline bool training_stage(Stage s) { return s == Stage::Loss || s == Stage::Backward; }

}  // namespace quorum::core
