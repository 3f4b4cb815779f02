// The libtorch backend's execution variants (backend options, docs/backends.md), shared by the
// backend and its reproducer writer: `torch:channels_last` gives every 4-D (5-D) input and weight
// the channels-last memory format, `torch:strided` makes every input and weight a non-contiguous
// view (every other element of a buffer twice as long in the last axis), `torch:threads=N` runs
// ATen's intra-op pool with N threads. The values are the same; the kernels ATen picks are not.
// `torch:qengine=qnnpack` runs the quantized operators on QNNPACK instead of the default oneDNN engine
// (the two quantized engines Debian's libtorch is built with; it has no FBGEMM).
// No ATen header here.
#pragma once
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"

namespace quorum::backends::torch {

struct Variant {
  bool channels_last = false;
  bool strided = false;
  int threads = 0;  // 0: the compile options' count
  std::string qengine = "onednn";  // libtorch's quantized engine: "onednn" or "qnnpack"
};

inline Variant parse_variant(const std::vector<std::string>& args) {
  Variant v;
  for (const auto& a : args) {
    if (a == "channels_last") v.channels_last = true;
    else if (a == "strided") v.strided = true;
    else if (a.rfind("threads=", 0) == 0) v.threads = count_option("torch", a);
    else if (a == "qengine=onednn" || a == "qengine=qnnpack") v.qengine = a.substr(8);
    else
      throw core::UserError("backend 'torch': unknown option '" + a +
                            "' (channels_last, strided, threads=N, qengine=onednn|qnnpack)");
  }
  return v;
}

}  // namespace quorum::backends::torch
