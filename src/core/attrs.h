// Operator attributes: a small closed set of value kinds, kept in a sorted map so that every
// rendering (JSON, signatures, hashes) is deterministic.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace quorum::core {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;
enum class AttrKind { Int, Float, String, Ints, Floats };
using Attrs = std::map<std::string, AttrValue>;

AttrKind kind_of(const AttrValue& v);
std::string to_string(AttrKind k);
std::string to_string(const AttrValue& v);  // e.g. 3, 0.5, "same", [1,2]
std::string to_string(const Attrs& a);      // e.g. {kernel=[3,3], strides=[1,1]}

// Accessors for kernels and shape rules. The attribute must be present (specs fill defaults);
// a Float accessor also accepts an Int.
int64_t attr_i(const Attrs& a, const std::string& name);
double attr_f(const Attrs& a, const std::string& name);
const std::string& attr_s(const Attrs& a, const std::string& name);
const std::vector<int64_t>& attr_ints(const Attrs& a, const std::string& name);
const std::vector<double>& attr_floats(const Attrs& a, const std::string& name);

}  // namespace quorum::core
