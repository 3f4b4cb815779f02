// .npy reader and writer.
#include "core/npy.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fileio.h"

namespace quorum::core {

namespace {
std::string descr_of(DType d) {
  switch (d) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I64: return "<i8";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::I32: return "<i4";
  }
  return "";
}

// Finds the value text after 'key': in a Python dict literal header.
std::string header_field(const std::string& header, const std::string& key, const std::string& what) {
  const std::string k = "'" + key + "'";
  size_t p = header.find(k);
  if (p == std::string::npos) throw UserError(what + ": npy header has no '" + key + "'");
  p = header.find(':', p + k.size());
  if (p == std::string::npos) throw UserError(what + ": malformed npy header");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t end = p;
  if (p == header.size()) throw UserError(what + ": malformed npy header");
  if (header[p] == '(') {
    end = header.find(')', p);
    if (end == std::string::npos) throw UserError(what + ": malformed npy shape");
    return header.substr(p, end - p + 1);
  }
  if (header[p] == '\'') {
    end = header.find('\'', p + 1);
    if (end == std::string::npos) throw UserError(what + ": malformed npy header");
    return header.substr(p + 1, end - p - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(p, end - p);
}
}  // namespace

std::string npy_bytes(const Tensor& t) {
  std::ostringstream h;
  h << "{'descr': '" << descr_of(t.dtype()) << "', 'fortran_order': False, 'shape': (";
  // Python tuple syntax: (), (3,), (2, 3).
  for (size_t i = 0; i < t.shape().size(); ++i) h << (i ? ", " : "") << t.shape()[i];
  if (t.shape().size() == 1) h << ",";
  h << "), }";
  std::string header = h.str();
  // Pad so that magic(6)+version(2)+len(2)+header is a multiple of 64, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw UserError(what + ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, off;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw UserError(what + ": truncated npy header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    off = 12;
  } else {
    throw UserError(what + ": unsupported npy version " + std::to_string(major));
  }
  if (bytes.size() < off + hlen) throw UserError(what + ": truncated npy header");
  const std::string header = bytes.substr(off, hlen);
  const std::string descr = header_field(header, "descr", what);
  // Byte order: '<' little-endian, '>' big-endian (swapped on read), '=' native.
  const char order = descr.empty() ? '?' : descr[0];
  const std::string kind = descr.size() > 1 ? descr.substr(1) : "";
  static const std::pair<const char*, DType> kKinds[] = {{"f4", DType::F32}, {"f8", DType::F64}, {"i8", DType::I64},
                                                        {"i1", DType::I8},  {"u1", DType::U8},  {"i4", DType::I32}};
  const auto* known =
      std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto& k) { return kind == k.first; });
  const bool one_byte = known != std::end(kKinds) && dtype_size(known->second) == 1;  // numpy writes '|' for them
  if ((order != '<' && order != '>' && order != '=' && !(order == '|' && one_byte)) || known == std::end(kKinds))
    throw UserError(what + ": unsupported npy dtype '" + descr +
                    "' (expected f4, f8, i8, i4, i1 or u1, either byte order)");
  const DType dtype = known->second;
  const std::string fortran = header_field(header, "fortran_order", what);
  if (fortran != "False" && fortran != "True") throw UserError(what + ": malformed npy fortran_order " + fortran);
  std::string shape_text = header_field(header, "shape", what);
  Shape shape;
  std::string num;
  for (char c : shape_text) {
    if (c >= '0' && c <= '9') {
      num.push_back(c);
      if (num.size() > 18) throw UserError(what + ": npy shape " + shape_text + " is too large");
    } else if (c == ',' || c == ')') {
      if (!num.empty()) shape.push_back(std::stoll(num));
      num.clear();
    } else if (c != '(' && c != ' ' && c != 'L') {
      throw UserError(what + ": malformed npy shape " + shape_text);
    }
  }
  // A shape no data could hold is refused before anything is allocated or multiplied out (the
  // product of the nonzero dimensions, in double: an empty array's numel multiplies them too).
  double nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    empty |= d == 0;
    nonzero *= d == 0 ? 1.0 : static_cast<double>(d);
  }
  if (nonzero > (empty ? 0x1p40 : static_cast<double>(bytes.size())))
    throw UserError(what + ": npy shape " + to_string(shape) + " is larger than the file's data");
  const size_t need = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  if (bytes.size() - off - hlen != need)
    throw UserError(what + ": npy data has " + std::to_string(bytes.size() - off - hlen) + " bytes, shape " +
                    to_string(shape) + " needs " + std::to_string(need));
  Tensor t(dtype, shape);
  const char* data = bytes.data() + off + hlen;
  const size_t size = dtype_size(dtype), count = t.nbytes() / size;
  char* dst = static_cast<char*>(t.raw());
  if (fortran == "False") {
    if (t.nbytes() > 0) std::memcpy(dst, data, t.nbytes());  // an empty array has no buffer
  } else {
    // Column-major on file: the element at row-major index i sits at its column-major offset.
    const size_t rank = shape.size();
    for (size_t i = 0; i < count; ++i) {
      size_t rest = i, src = 0;
      for (size_t d = rank; d-- > 0;) {
        const size_t dim = static_cast<size_t>(shape[d]), at = rest % dim;
        rest /= dim;
        size_t stride = 1;  // column-major: the dimensions before d
        for (size_t e = 0; e < d; ++e) stride *= static_cast<size_t>(shape[e]);
        src += at * stride;
      }
      std::memcpy(dst + i * size, data + src * size, size);
    }
  }
  const bool little = std::endian::native == std::endian::little;
  if ((order == '>' && little) || (order == '<' && !little))
    for (size_t i = 0; i < count; ++i) std::reverse(dst + i * size, dst + (i + 1) * size);
  return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

void write_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, npy_bytes(t)); }

}  // namespace quorum::core
