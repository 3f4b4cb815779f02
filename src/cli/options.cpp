// The flag parser, generated from flags.def.
#include "cli/options.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "core/error.h"

namespace quorum::cli {

using core::UserError;

namespace {

enum class Kind { STRING, UINT, FLOAT, RATE, DURATION, FLAG };

struct FlagDef {
  std::string name;
  Kind kind;
  std::string def;
  std::string help;
  std::function<void(Options&, const std::string&)> set;
};

// Every uint64_t value (a bundle's form seed is a 64-bit hash, often of 20 digits); anything else is refused.
uint64_t parse_uint(const std::string& flag, const std::string& v) {
  const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::string most = std::to_string(std::numeric_limits<uint64_t>::max());
  if (!digits || v.size() > most.size() || (v.size() == most.size() && v > most))
    throw UserError("--" + flag + ": expected an integer from 0 to " + most + ", got '" + v + "'");
  return std::stoull(v);
}

double parse_float(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || !std::isfinite(d) || d < 0)
    throw UserError("--" + flag + ": expected a number >= 0, got '" + v + "'");
  return d;
}

double parse_rate(const std::string& flag, const std::string& v) {
  const double d = parse_float(flag, v);
  if (d > 1) throw UserError("--" + flag + ": expected a number from 0 to 1, got '" + v + "'");
  return d;
}

const std::vector<FlagDef>& table() {
  static const std::vector<FlagDef> t = {
#define QUORUM_SET_STRING(name) [](Options& o, const std::string& v) { o.name = v; }
#define QUORUM_SET_UINT(name) [](Options& o, const std::string& v) { o.name = parse_uint(#name, v); }
#define QUORUM_SET_FLOAT(name) [](Options& o, const std::string& v) { o.name = parse_float(#name, v); }
#define QUORUM_SET_RATE(name) [](Options& o, const std::string& v) { o.name = parse_rate(#name, v); }
#define QUORUM_SET_DURATION(name) [](Options& o, const std::string& v) { o.name = duration_seconds(#name, v); }
#define QUORUM_SET_FLAG(name) [](Options& o, const std::string&) { o.name = true; }
#define QUORUM_FLAG(name, kind, def, help) FlagDef{#name, Kind::kind, def, help, QUORUM_SET_##kind(name)},
#include "cli/flags.def"
#undef QUORUM_FLAG
#undef QUORUM_SET_STRING
#undef QUORUM_SET_UINT
#undef QUORUM_SET_FLOAT
#undef QUORUM_SET_RATE
#undef QUORUM_SET_DURATION
#undef QUORUM_SET_FLAG
  };
  return t;
}

const FlagDef* find(const std::string& name) {
  for (const auto& f : table())
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace

double duration_seconds(const std::string& flag, const std::string& v) {
  if (v.empty()) return 0;
  const std::string bad = "--" + flag + ": expected a duration like 90s, 10m or 2h, got '" + v + "'";
  size_t pos = 0;
  double d = 0;
  try {
    d = std::stod(v, &pos);
  } catch (const std::exception&) {
    throw UserError(bad);
  }
  const std::string unit = v.substr(pos);
  double mult = 0;
  if (unit.empty() || unit == "s") mult = 1;
  else if (unit == "m") mult = 60;
  else if (unit == "h") mult = 3600;
  if (mult == 0 || !(d >= 0) || !std::isfinite(d)) throw UserError(bad);
  return d * mult;
}

namespace {

// Flags whose spelling changed: the command, the old name, and the line that names the new one. An entry
// with a mode (a flag of the command, such as fuzz's --trained) refuses the old name only with that flag:
// the command still takes it for its other modes.
struct Renamed {
  const char* command;
  const char* mode;
  const char* old_name;
  const char* now;
};
constexpr Renamed kRenamed[] = {
    {"search", "", "target",
     "is now '--expose library|model' (what GRIST exposes); '--target' is the loss target only"},
    {"detect", "", "batch",
     "is now '--eval_batch N' (validation images per library call); '--batch' is a training step's"},
    {"fuzz", "", "batch",
     "is now '--eval_batch N' (--trained: validation images per library call); '--batch' is a training step's"},
    {"fuzz", "trained", "mutation_rate",
     "is now '--mutant_noise' (the weight mutants' noise; '--mutation_rate' is the mutate generator's)"},
};

}  // namespace

Options parse_flags(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                    const std::string& command) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    // The one short alias: -o for --output.
    const std::string a = args[i] == "-o" ? std::string("--output") : args[i];
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (!a.empty() && a[0] == '-' && a != "-") throw UserError("unknown flag '" + a + "' for '" + command + "'");
      o.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagDef* f = find(name);
    const bool takes = std::find(allowed.begin(), allowed.end(), name) != allowed.end();
    for (const Renamed& r : kRenamed)
      if (!takes && command == r.command && !*r.mode && name == r.old_name)
        throw UserError("'--" + name + "' of '" + command + "' " + r.now);
    if (!f || !takes)
      throw UserError("unknown flag '--" + name + "' for '" + command + "' (see quorum " + command + " --help)");
    if (f->kind != Kind::FLAG && !has_value) {
      if (i + 1 >= args.size()) throw UserError("flag '--" + name + "' needs a value");
      value = args[++i];
    } else if (f->kind == Kind::FLAG && has_value) {
      throw UserError("flag '--" + name + "' takes no value");
    }
    f->set(o, value);
    o.given.insert(name);
  }
  for (const Renamed& r : kRenamed)
    if (*r.mode && command == r.command && o.given.count(r.mode) && o.given.count(r.old_name))
      throw UserError("'--" + std::string(r.old_name) + "' of '" + command + " --" + r.mode + "' " + r.now);
  return o;
}

std::string flag_help(const std::vector<std::string>& flags) {
  std::ostringstream os;
  auto left_of = [](const FlagDef& f) {
    return "--" + f.name + (f.kind == Kind::FLAG ? "" : f.kind == Kind::UINT ? " N" : " V");
  };
  size_t width = 0;
  for (const auto& name : flags)
    if (const FlagDef* f = find(name)) width = std::max(width, left_of(*f).size());
  for (const auto& name : flags) {
    if (!name.empty() && name[0] == '#') {  // a group's heading
      os << name.substr(1) << ":\n";
      continue;
    }
    const FlagDef* f = find(name);
    if (!f) continue;
    const std::string left = left_of(*f);
    os << "  " << left << std::string(width + 2 - left.size(), ' ') << f->help;
    if (!f->def.empty() && f->kind != Kind::FLAG) os << " (default " << f->def << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace quorum::cli
