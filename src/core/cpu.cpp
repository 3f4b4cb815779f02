#include "core/cpu.h"

#include <fstream>
#include <sstream>

namespace quorum::core {

namespace {
// The value of the first line of /proc/cpuinfo that starts with `key` ("model name"), or "".
std::string cpuinfo_field(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}
}  // namespace

std::string cpu_model() {
  const std::string m = cpuinfo_field("model name");
  return m.empty() ? "unknown CPU" : m;
}

const std::set<std::string>& cpu_flags() {
  static const std::set<std::string> flags = [] {
    std::set<std::string> s;
    std::istringstream in(cpuinfo_field("flags"));
    for (std::string w; in >> w;) s.insert(w);
    return s;
  }();
  return flags;
}

}  // namespace quorum::core
