// Shared by the libFuzzer harnesses of Quorum's readers of untrusted input (fuzz/*_fuzz.cpp).
// A harness feeds one input to one reader. The reader's documented refusal (a UserError, or the
// reader's own error type) is an expected outcome; anything else escaping the harness (another
// exception: std::terminate aborts), a sanitizer report, an abort or an allocation past
// -malloc_limit_mb is a bug that libFuzzer reports as a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace quorum::fuzz {

inline std::string text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `read`; a UserError is the reader refusing the input, as documented.
template <class Fn>
void expect_user_error(Fn&& read) {
  try {
    read();
  } catch (const core::UserError&) {
  }
}

}  // namespace quorum::fuzz
