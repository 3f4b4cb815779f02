// The oneDNN backend's execution variants (backend options, docs/backends.md), shared by the
// backend and its reproducer writer: `onednn:isa=avx2` limits oneDNN's ISA dispatch (the worker sets
// ONEDNN_MAX_CPU_ISA before any oneDNN call: the JIT kernels of a lower ISA run), and
// `onednn:threads=N` runs its OpenMP regions with N threads. No oneDNN header here.
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"

namespace quorum::backends::onednn {

struct Variant {
  std::string isa;  // lower case, as oneDNN's cpu_isa enumerators: "avx2"; empty: no limit
  int threads = 0;  // 0: the compile options' count
};

// The values ONEDNN_MAX_CPU_ISA takes (oneDNN 2.6), lower case.
inline const std::vector<std::string>& isa_values() {
  static const std::vector<std::string> v = {"sse41",       "avx",         "avx2",           "avx2_vnni",
                                             "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
                                             "avx512_core_amx", "all"};
  return v;
}

inline Variant parse_variant(const std::vector<std::string>& args) {
  Variant v;
  for (const auto& a : args) {
    if (a.rfind("isa=", 0) == 0) {
      v.isa = a.substr(4);
      bool known = false;
      for (const auto& i : isa_values()) known = known || i == v.isa;
      if (!known) {
        std::string list;
        for (const auto& i : isa_values()) list += (list.empty() ? "" : ", ") + i;
        throw core::UserError("backend 'onednn': isa= takes one of " + list + ", got '" + a + "'");
      }
    } else if (a.rfind("threads=", 0) == 0) {
      v.threads = count_option("onednn", a);
    } else {
      throw core::UserError("backend 'onednn': unknown option '" + a + "' (isa=ISA, threads=N)");
    }
  }
  return v;
}

// ONEDNN_MAX_CPU_ISA's value for `isa`: upper case ("AVX2").
inline std::string isa_env_value(const std::string& isa) {
  std::string s = isa;
  for (char& ch : s) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  return s;
}

}  // namespace quorum::backends::onednn
