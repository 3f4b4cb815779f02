// JSON model format. Numbers round-trip exactly: doubles are written in their shortest round-trip
// form; non-finite values as the strings "nan", "inf", "-inf".
#include "ir/json_io.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fileio.h"
#include "ir/onnx_io.h"

namespace quorum::ir {

using core::UserError;
using json = nlohmann::ordered_json;

namespace {

constexpr int kFormatVersion = 1;

// The double whose shortest decimal form is the shortest form that round-trips float32 `f`, so a
// float32 weight is written as "0.1" rather than "0.10000000149011612".
double shortest_f32(float f) {
  if (!std::isfinite(f)) return f;
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

json number(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}

struct Reader {
  std::string where;

  [[noreturn]] void fail(const std::string& ctx, const std::string& msg) const {
    throw UserError(where + ": " + ctx + msg);
  }
  const json& field(const json& obj, const char* key, const std::string& ctx) const {
    if (!obj.is_object()) fail(ctx, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(ctx, std::string("missing field '") + key + "'");
    return *it;
  }
  std::string str(const json& j, const std::string& ctx) const {
    if (!j.is_string()) fail(ctx, "expected a string, got " + j.dump());
    return j.get<std::string>();
  }
  double num(const json& j, const std::string& ctx) const {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
      const auto s = j.get<std::string>();
      if (s == "nan") return std::nan("");
      if (s == "inf") return HUGE_VAL;
      if (s == "-inf") return -HUGE_VAL;
    }
    fail(ctx, "expected a number, got " + j.dump());
  }
  core::Shape shape(const json& j, const std::string& ctx) const {
    if (!j.is_array()) fail(ctx, "shape must be an array of non-negative integers");
    core::Shape s;
    for (const auto& d : j) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) fail(ctx, "shape must be an array of non-negative integers");
      s.push_back(d.get<int64_t>());
    }
    return s;
  }
  TensorType type(const json& j, const std::string& ctx) const {
    TensorType t;
    try {
      t.dtype = core::dtype_from_string(str(field(j, "dtype", ctx), ctx));
    } catch (const UserError& e) {
      fail(ctx, e.what());
    }
    t.shape = shape(field(j, "shape", ctx), ctx);
    return t;
  }
  core::AttrValue attr(const json& j, const std::string& ctx) const {
    if (j.is_number_integer()) return j.get<int64_t>();
    if (j.is_number_float()) return j.get<double>();
    if (j.is_string()) {
      // Non-finite floats are spelled as strings; the op's spec decides (canonical_attrs keeps
      // them strings if the attribute is a string).
      return j.get<std::string>();
    }
    if (j.is_array()) {
      bool all_int = true;
      for (const auto& x : j) {
        if (!x.is_number() && !x.is_string()) fail(ctx, "list attributes hold numbers only");
        if (!x.is_number_integer()) all_int = false;
      }
      if (all_int) return j.get<std::vector<int64_t>>();
      std::vector<double> v;
      for (const auto& x : j) v.push_back(num(x, ctx));
      return v;
    }
    fail(ctx, "attribute must be a number, string or list of numbers, got " + j.dump());
  }
};

}  // namespace

Graph graph_from_json(const std::string& text, const std::string& where, const ValidateOptions& opt) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number beyond double (out_of_range)
    std::string msg = e.what();
    auto p = msg.find("parse error");
    if (p == std::string::npos) p = msg.find("] ");
    throw UserError(where + ": malformed JSON: " +
                    (p == std::string::npos ? msg : msg.substr(msg.compare(p, 2, "] ") == 0 ? p + 2 : p)));
  }
  Reader r{where};
  Graph g;
  if (!root.is_object()) r.fail("", "the model must be a JSON object");
  if (root.contains("format")) {
    const auto& f = root["format"];
    if (!f.is_string() || f.get<std::string>() != "quorum.model") r.fail("", "field 'format' must be \"quorum.model\"");
  }
  if (root.contains("version")) {
    const auto& v = root["version"];
    if (!v.is_number_integer() || v.get<int>() != kFormatVersion)
      r.fail("", "unsupported model format version " + v.dump() + " (this Quorum reads " +
                     std::to_string(kFormatVersion) + ")");
  }
  if (root.contains("name")) g.name = r.str(root["name"], "field 'name': ");
  const json& inputs = r.field(root, "inputs", "");
  if (!inputs.is_array()) r.fail("", "field 'inputs' must be an array");
  for (const auto& in : inputs) {
    const std::string name = r.str(r.field(in, "name", "graph input: "), "graph input: ");
    g.inputs.push_back({name, r.type(in, "graph input '" + name + "': ")});
  }
  const json& outputs = r.field(root, "outputs", "");
  if (!outputs.is_array()) r.fail("", "field 'outputs' must be an array of value names");
  for (const auto& o : outputs) g.outputs.push_back(r.str(o, "graph outputs: "));
  if (root.contains("initializers")) {
    const json& inits = root["initializers"];
    if (!inits.is_array()) r.fail("", "field 'initializers' must be an array");
    for (const auto& in : inits) {
      const std::string name = r.str(r.field(in, "name", "initializer: "), "initializer: ");
      const std::string ctx = "initializer '" + name + "': ";
      const TensorType t = r.type(in, ctx);
      const json& data = r.field(in, "data", ctx);
      if (!data.is_array()) r.fail(ctx, "'data' must be an array of numbers");
      Tensor tensor(t);
      if (static_cast<int64_t>(data.size()) != tensor.numel())
        r.fail(ctx, "has " + std::to_string(data.size()) + " values, shape " + core::to_string(t.shape) + " needs " +
                        std::to_string(tensor.numel()));
      for (size_t i = 0; i < data.size(); ++i) {
        const double v = r.num(data[i], ctx);
        if (!core::representable(t.dtype, v))
          r.fail(ctx, "value " + data[i].dump() + " is not a " + core::to_string(t.dtype) + " value");
        tensor.set(static_cast<int64_t>(i), v);
      }
      if (g.initializers.count(name)) r.fail("", "initializer '" + name + "' is defined twice");
      g.initializers.emplace(name, std::move(tensor));
    }
  }
  const json& nodes = r.field(root, "nodes", "");
  if (!nodes.is_array()) r.fail("", "field 'nodes' must be an array");
  for (const auto& jn : nodes) {
    Node n;
    n.op = r.str(r.field(jn, "op", "node: "), "node: ");
    n.name = jn.contains("name") ? r.str(jn["name"], "node: ") : "";
    const std::string ctx = "node '" + n.name + "' (" + n.op + "): ";
    const json& ins = r.field(jn, "inputs", ctx);
    if (!ins.is_array()) r.fail(ctx, "'inputs' must be an array of value names");
    for (const auto& i : ins) n.inputs.push_back(r.str(i, ctx));
    const json& outs = r.field(jn, "outputs", ctx);
    if (!outs.is_array()) r.fail(ctx, "'outputs' must be an array");
    for (const auto& o : outs) {
      if (o.is_string()) {
        n.outputs.push_back(o.get<std::string>());
      } else {
        const std::string oname = r.str(r.field(o, "name", ctx), ctx);
        n.outputs.push_back(oname);
        g.types[oname] = r.type(o, ctx + "output '" + oname + "': ");
      }
    }
    if (jn.contains("attrs")) {
      const json& attrs = jn["attrs"];
      if (!attrs.is_object()) r.fail(ctx, "'attrs' must be an object");
      for (const auto& [k, v] : attrs.items()) n.attrs[k] = r.attr(v, ctx + "attribute '" + k + "': ");
    }
    g.nodes.push_back(std::move(n));
  }
  validate(g, where, opt);
  return g;
}

std::string graph_to_json(const Graph& g) {
  json root;
  root["format"] = "quorum.model";
  root["version"] = kFormatVersion;
  root["name"] = g.name;
  root["inputs"] = json::array();
  for (const auto& in : g.inputs)
    root["inputs"].push_back({{"name", in.name}, {"dtype", core::to_string(in.type.dtype)}, {"shape", in.type.shape}});
  root["outputs"] = g.outputs;
  root["initializers"] = json::array();
  // Weight arrays are written on one line each: a placeholder is swapped for the compact array.
  std::vector<std::string> compact;
  for (const auto& [name, t] : g.initializers) {
    json data = json::array();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == core::DType::I64) data.push_back(t.i64()[i]);
      else if (!core::is_float(t.dtype())) data.push_back(static_cast<int64_t>(t.get(i)));
      else if (t.dtype() == core::DType::F32) data.push_back(number(shortest_f32(t.f32()[i])));
      else data.push_back(number(t.f64()[i]));
    }
    compact.push_back(data.dump());
    root["initializers"].push_back({{"name", name},
                                    {"dtype", core::to_string(t.dtype())},
                                    {"shape", t.shape()},
                                    {"data", "@@data" + std::to_string(compact.size() - 1) + "@@"}});
  }
  root["nodes"] = json::array();
  for (const auto& n : g.nodes) {
    json jn;
    jn["name"] = n.name;
    jn["op"] = n.op;
    jn["inputs"] = n.inputs;
    jn["outputs"] = json::array();
    for (const auto& o : n.outputs) {
      auto it = g.types.find(o);
      if (it == g.types.end()) {
        jn["outputs"].push_back(o);
      } else {
        jn["outputs"].push_back(
            {{"name", o}, {"dtype", core::to_string(it->second.dtype)}, {"shape", it->second.shape}});
      }
    }
    json attrs = json::object();
    for (const auto& [key, v] : n.attrs) {
      const std::string& k = key;  // (clang before 16 cannot capture a structured binding)
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, double>) {
              attrs[k] = number(x);
            } else if constexpr (std::is_same_v<T, std::vector<double>>) {
              json arr = json::array();
              for (double d : x) arr.push_back(number(d));
              attrs[k] = arr;
            } else {
              attrs[k] = x;
            }
          },
          v);
    }
    jn["attrs"] = attrs;
    root["nodes"].push_back(std::move(jn));
  }
  std::string text = root.dump(1);
  size_t pos = 0;
  for (size_t i = 0; i < compact.size(); ++i) {
    const std::string marker = "\"@@data" + std::to_string(i) + "@@\"";
    pos = text.find(marker, pos);
    QUORUM_CHECK(pos != std::string::npos, "weight placeholder lost");
    text.replace(pos, marker.size(), compact[i]);
    pos += compact[i].size();
  }
  return text + "\n";
}

Graph load_graph(const std::string& path, const ValidateOptions& opt) {
  auto ends_with = [&](const std::string& ext) {
    return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends_with(".json")) return graph_from_json(core::read_file(path), path, opt);
  if (ends_with(".onnx")) return graph_from_onnx(core::read_file(path), path, opt);
  throw UserError(path + ": unsupported model file type (expected .json or .onnx)");
}

void save_graph(const std::string& path, const Graph& g) { core::write_file_atomic(path, graph_to_json(g)); }

}  // namespace quorum::ir
