#include "core/finding_kind.h"

#include "core/error.h"

namespace quorum::core {

const std::vector<FindingKindInfo>& finding_kinds() {
  static const std::vector<FindingKindInfo> kinds = {
      {FindingKind::Crash, "crash", SignatureBy::Message, false, ""},
      {FindingKind::NaN, "nan", SignatureBy::Operator, true, "produces NaN/Inf where the float64 result is finite"},
      {FindingKind::NaNSwallowed, "nan-swallowed", SignatureBy::Operator, true, "turns a NaN into a number"},
      {FindingKind::Inconsistency, "inconsistency", SignatureBy::Params, true, "returns wrong values"},
      {FindingKind::Detection, "detection", SignatureBy::Message, false, "changes a trained model's predictions"},
  };
  return kinds;
}

const FindingKindInfo& info(FindingKind k) {
  for (const auto& i : finding_kinds())
    if (i.kind == k) return i;
  internal_error("finding kind " + std::to_string(static_cast<int>(k)) + " has no entry in finding_kinds()");
}

const char* to_string(FindingKind k) { return info(k).name; }

FindingKind finding_kind_from_string(const std::string& s) {
  for (const auto& i : finding_kinds())
    if (s == i.name) return i.kind;
  std::string known;
  for (const auto& i : finding_kinds()) known += std::string(known.empty() ? "" : ", ") + i.name;
  throw UserError("unknown finding kind '" + s + "' (expected one of " + known + ")");
}

const char* to_string(Stage s) {
  switch (s) {
    case Stage::Compile: return "compile";
    case Stage::Forward: return "FC";
    case Stage::Loss: return "LC";
    case Stage::Backward: return "BC";
    case Stage::Optimized: return "OC";
    case Stage::Batch: return "BR";
    case Stage::Form: return "FR";
    case Stage::Position: return "PR";
  }
  return "?";
}

Stage stage_from_string(const std::string& s) {
  for (const Stage t : {Stage::Compile, Stage::Forward, Stage::Loss, Stage::Backward, Stage::Optimized,
                        Stage::Batch, Stage::Form, Stage::Position})
    if (s == to_string(t)) return t;
  throw UserError("unknown finding stage '" + s + "' (expected compile, FC, LC, BC, OC, BR, FR or PR)");
}

}  // namespace quorum::core
