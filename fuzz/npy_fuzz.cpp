// NumPy .npy files (core/npy.h): a bundle's inputs, outputs and target, `quorum run --inputs`.
// Refusal: UserError. An array that parses must write back to the same bytes' array.
#include <cstdlib>

#include "core/npy.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  fuzz::expect_user_error([&] {
    const core::Tensor t = core::parse_npy(fuzz::text(data, size), "fuzz.npy");
    const core::Tensor back = core::parse_npy(core::npy_bytes(t), "fuzz.npy (written back)");
    if (back.shape() != t.shape() || back.nbytes() != t.nbytes()) std::abort();
  });
  return 0;
}
