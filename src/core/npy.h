// NumPy .npy files: float32, float64, int64. Written as format 1.0, little-endian, C order; read in
// format 1.0, 2.0 or 3.0, either byte order (big-endian swapped) and C or Fortran order (transposed
// into row-major on read), as NumPy users write them.
#pragma once
#include <string>

#include "core/tensor.h"

namespace quorum::core {

// Throws UserError naming the file on any malformed or unsupported content.
Tensor read_npy(const std::string& path);
// Writes atomically: a temporary file renamed into place, so a reader never sees half a file.
void write_npy(const std::string& path, const Tensor& t);

std::string npy_bytes(const Tensor& t);
Tensor parse_npy(const std::string& bytes, const std::string& what);

}  // namespace quorum::core
