// Options parsed from the command line (generated from flags.def).
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace quorum::cli {

// "90s", "10m", "2h" or a bare number of seconds as seconds ("" is 0); UserError naming --flag for
// anything else.
double duration_seconds(const std::string& flag, const std::string& v);

struct Options {
#define QUORUM_FLAG_STRING(name, def) std::string name = def;
#define QUORUM_FLAG_UINT(name, def) uint64_t name = std::stoull(def);
#define QUORUM_FLAG_FLOAT(name, def) double name = std::stod(def);
#define QUORUM_FLAG_RATE(name, def) double name = std::stod(def);
#define QUORUM_FLAG_DURATION(name, def) double name = duration_seconds(#name, def);  // seconds
#define QUORUM_FLAG_FLAG(name, def) bool name = false;
#define QUORUM_FLAG(name, kind, def, help) QUORUM_FLAG_##kind(name, def)
#include "cli/flags.def"
#undef QUORUM_FLAG
#undef QUORUM_FLAG_STRING
#undef QUORUM_FLAG_UINT
#undef QUORUM_FLAG_FLOAT
#undef QUORUM_FLAG_RATE
#undef QUORUM_FLAG_DURATION
#undef QUORUM_FLAG_FLAG
  std::vector<std::string> positional;
  std::set<std::string> given;  // flags that appeared on the command line
  std::string command_line;     // the whole invocation, for bundles and replay
};

// Parses argv after the command name. `allowed` lists the flags this command takes; any other
// flag, a missing value or a malformed number is a UserError.
Options parse_flags(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                    const std::string& command);
// "  --seed N   seed of the one RNG ..." lines for the given flags.
std::string flag_help(const std::vector<std::string>& flags);  // "#heading" entries start a group

}  // namespace quorum::cli
