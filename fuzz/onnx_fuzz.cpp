// The ONNX bridge's import side (ir/onnx_io.h): a ModelProto or TensorProto someone shares.
// Refusal: UserError.
#include "fuzz.h"
#include "ir/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quorum;
  const std::string bytes = fuzz::text(data, size);
  fuzz::expect_user_error([&] { ir::onnx_summary(bytes, "fuzz.onnx"); });
  fuzz::expect_user_error([&] { ir::graph_from_onnx(bytes, "fuzz.onnx"); });
  fuzz::expect_user_error([&] { ir::tensor_from_onnx(bytes, "fuzz.pb"); });
  return 0;
}
