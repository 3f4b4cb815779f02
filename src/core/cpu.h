// What CPU this is: its model name and its feature flags as the kernel reports them (/proc/cpuinfo),
// for the records that depend on the instruction set a library's kernels pick.
#pragma once
#include <set>
#include <string>

namespace quorum::core {

// The first processor's "model name", or "unknown CPU".
std::string cpu_model();
// The first processor's "flags" (avx2, avx512f, amx_tile, ...); empty where the file is unreadable.
const std::set<std::string>& cpu_flags();

}  // namespace quorum::core
