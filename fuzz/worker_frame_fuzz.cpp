// Worker frames (worker/codec.h, protocol.h): what a worker writes on its pipe is decoded by the
// supervisor, and a library that scribbles on the worker's stdout or corrupts its memory can send
// anything. The first byte picks the decoder (the request and reply payload parts a Reader
// decodes); the rest is the payload. Refusal: MalformedMessage.
#include "fuzz.h"
#include "worker/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  if (size == 0) return 0;
  worker::Reader r(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 6) {
      case 0: r.graph(); break;    // Supports and Compile requests
      case 1: r.values(); break;   // Forward request and reply
      case 2: r.tensor(); break;   // a Train request's target
      case 3: r.attrs(); break;    // a Train request's loss attributes
      case 4: {                    // a Train reply
        r.f64();
        r.tensor();
        for (int i = 0; i < 3; ++i) r.values();
        break;
      }
      case 5: {  // a Lowering reply: per node its library operations
        for (uint32_t i = 0, n = r.u32(); i < n; ++i) {
          r.str();
          for (uint32_t k = 0, m = r.u32(); k < m; ++k) r.str();
        }
        break;
      }
    }
  } catch (const worker::MalformedMessage&) {
  }
  return 0;
}
