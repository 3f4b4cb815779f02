// What ArmNN's optimizer did to the network the lowering built (see lower_passes.h).
#include "backends/armnn/lower_passes.h"

#include <algorithm>

namespace quorum::backends::armnn_lower {

namespace {

// ArmNN's TransposeAsReshape test: the axes of size > 1 keep their order (output axis i is input axis perm[i]).
bool moves_unit_axes_only(const std::vector<size_t>& perm, const Shape& out) {
  if (perm.size() != out.size()) return false;
  bool first = true;
  size_t last = 0;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (out[i] <= 1) continue;
    if (!first && perm[i] < last) return false;
    last = perm[i];
    first = false;
  }
  return true;
}

// What FoldPadIntoConvolution2d gets wrong folding this Pad: it drops the pad value, and takes the pads of
// the batch and channel axes as spatial ones.
std::vector<std::string> fold_defects(const PadLayer& p) {
  std::vector<std::string> out;
  if (p.value != 0) out.push_back("pad value");
  for (size_t d = 0; d < p.begin.size() && d < 2; ++d)
    if (p.begin[d] != 0 || p.end.at(d) != 0) {
      out.push_back("channel axis");
      break;
    }
  return out;
}

}  // namespace

int NetworkRecorder::input(size_t index, const std::string& name, const Shape& shape, const Quant& q) {
  const int id = inner_.input(index, name, shape, q);
  BuiltLayer l;
  l.name = name;
  l.type = "Input";
  net_.layers[id] = std::move(l);
  return id;
}

int NetworkRecorder::layer(const Layer& layer, const std::vector<Value>& inputs, const Shape& out, const Quant& q,
                           const std::string& name) {
  const int id = inner_.layer(layer, inputs, out, q, name);
  BuiltLayer l;
  l.name = name;
  l.params = describe(layer);
  l.type = l.params.substr(0, l.params.find(' '));  // describe() starts with it ("Reshape [2,3]", "Addition")
  l.node = node_;
  for (const Value& v : inputs) l.inputs.push_back(v.id);
  if (const auto* t = std::get_if<TransposeLayer>(&layer)) l.as_reshape = moves_unit_axes_only(t->perm, out);
  if (const auto* p = std::get_if<PadLayer>(&layer)) l.fold_defects = fold_defects(*p);
  net_.layers[id] = std::move(l);
  return id;
}

void NetworkRecorder::output(size_t index, const std::string& name, const Value& v) {
  inner_.output(index, name, v);
  net_.outputs.push_back(v.id);
  net_.output_names.push_back(name);
}

void NetworkRecorder::node(const ir::Node& n) {
  node_ = n.name;
  inner_.node(n);
}

namespace {

// A name as SerializeToDot writes it.
std::string dot_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<' || c == '>') out += '\\';
    out += c;
  }
  return out;
}

// The prefixes a pass gives the layer it makes, and the pass. `chain`: the text before it may be another
// pass's prefix (a layer remade twice); the infixes ("-into-", "-with-") follow the first layer's name.
struct Mark {
  const char* text;
  const char* pass;
  bool chain;
};
constexpr const char* kFold = "FoldPadIntoConvolution2d";
constexpr Mark kMarks[] = {{"folded-", kFold, true},
                           {"-into-", kFold, false},
                           {"merged-", "OptimizeConsecutiveReshapes", true},
                           {"-with-", "OptimizeConsecutiveReshapes", false},
                           {"as_reshape-", "TransposeAsReshape", true},
                           {"moved_up-", "MoveTransposeUp", true}};

// The passes whose marks end `before` (the text of a made layer's name before a built layer's name), the
// innermost first.
std::vector<std::string> marks_before(std::string before) {
  std::vector<std::string> out;
  for (bool more = true; more;) {
    more = false;
    for (const Mark& m : kMarks) {
      const std::string t = m.text;
      if (before.size() < t.size() || before.compare(before.size() - t.size(), t.size(), t) != 0) continue;
      out.push_back(m.pass);
      before.resize(before.size() - t.size());
      more = m.chain;
      break;
    }
  }
  return out;
}

// Per built layer, the passes the names of the layers passes made (`made`) give it. The builder ends every
// layer's name with its own "#N", so a name is found by that number (one scan of each made name) and then
// checked whole, between '-' boundaries.
std::map<int, std::vector<std::string>> named_by(const BuiltNetwork& built, const std::set<std::string>& made) {
  std::map<std::string, int> by_number;
  for (const auto& [h, l] : built.layers)
    if (const size_t at = l.name.rfind('#'); !l.node.empty() && at != std::string::npos)
      by_number[l.name.substr(at)] = h;
  std::map<int, std::vector<std::string>> out;
  for (const auto& m : made) {
    std::vector<int> in_name;  // the built layers m names, each with FoldPadIntoConvolution2d among its passes
    int folded_pad = -1;
    for (size_t i = m.find('#'); i != std::string::npos; i = m.find('#', i + 1)) {
      size_t end = i + 1;
      while (end < m.size() && m[end] >= '0' && m[end] <= '9') ++end;
      if (end < m.size() && m[end] != '-') continue;
      const auto it = by_number.find(m.substr(i, end - i));
      if (it == by_number.end()) continue;
      const std::string name = dot_escaped(built.layers.at(it->second).name);
      if (name.size() > end || m.compare(end - name.size(), name.size(), name) != 0) continue;
      const size_t start = end - name.size();
      if (start > 0 && m[start - 1] != '-') continue;
      const std::vector<std::string> passes = marks_before(m.substr(0, start));
      out[it->second].insert(out[it->second].end(), passes.begin(), passes.end());
      if (std::find(passes.begin(), passes.end(), kFold) == passes.end()) continue;
      in_name.push_back(it->second);
      if (built.layers.at(it->second).type == "Pad") folded_pad = it->second;
    }
    // The defects of the folded Pad, on every layer of the fold.
    if (folded_pad < 0) continue;
    for (const auto& defect : built.layers.at(folded_pad).fold_defects)
      for (const int h : in_name)
        out[h].push_back(std::string(kFold) + " (" + defect + ")");
  }
  return out;
}

// The passes that dropped a layer still live in the network as built and named by no layer of the optimized
// one: bypasses, told apart by the layer's neighbours (ArmNN's passes bypass only Transpose and Reshape layers,
// a Transpose that moves only axes of size 1 as the Reshape TransposeAsReshape makes of it). `sibling`: set
// to an equal sibling the layer was squashed into.
std::vector<std::string> bypass_passes(const BuiltNetwork& net, const std::map<int, std::vector<int>>& consumers,
                                       int id, int& sibling) {
  const BuiltLayer& l = net.layers.at(id);
  auto kind = [&](int h) {
    const BuiltLayer& k = net.layers.at(h);
    return k.as_reshape ? std::string("Reshape") : k.type;
  };
  const std::string k = kind(id);
  if (k != "Transpose" && k != "Reshape") return {"removed " + l.type};
  const int producer = l.inputs.empty() ? -1 : l.inputs[0];
  if (producer >= 0 && consumers.count(producer))
    for (int s : consumers.at(producer))
      if (s != id && net.layers.at(s).params == l.params) {
        sibling = s;
        return {"SquashEqual" + l.type + "Siblings"};
      }
  bool adjacent = producer >= 0 && kind(producer) == k;
  if (consumers.count(id))
    for (int c : consumers.at(id)) adjacent = adjacent || kind(c) == k;
  // A Transpose MoveTransposeUp lifted above its producer, which made it an equal sibling of a Transpose of
  // one of that producer's inputs, then squashed into that sibling: nothing of the moved layer is left.
  if (!adjacent && k == "Transpose" && l.type == "Transpose" && producer >= 0)
    for (int in : net.layers.at(producer).inputs)
      if (consumers.count(in))
        for (int s : consumers.at(in))
          if (s != producer && net.layers.at(s).type == "Transpose" && net.layers.at(s).params == l.params) {
            sibling = s;
            return {"MoveTransposeUp", "SquashEqualTransposeSiblings"};
          }
  if (!adjacent) return {"removed " + l.type};
  if (k == "Transpose") return {"OptimizeInverseTransposes"};
  // A reshape pair that restores its input's shape: both go, no layer made.
  if (l.as_reshape) return {"TransposeAsReshape", "OptimizeConsecutiveReshapes"};
  return {"OptimizeConsecutiveReshapes"};
}

// The layers an output layer depends on (the others the optimizer erases as unused).
std::set<int> live_layers(const BuiltNetwork& net) {
  std::set<int> live;
  std::vector<int> todo = net.outputs;
  while (!todo.empty()) {
    const int h = todo.back();
    todo.pop_back();
    if (!live.insert(h).second) continue;
    const auto it = net.layers.find(h);
    if (it != net.layers.end()) todo.insert(todo.end(), it->second.inputs.begin(), it->second.inputs.end());
  }
  return live;
}

}  // namespace

std::set<std::string> dot_layer_names(const std::string& dot) {
  static const std::string kName = "LayerName : ", kEnd = "\\lLayerType : ";
  std::set<std::string> out;
  for (size_t at = dot.find(kName); at != std::string::npos; at = dot.find(kName, at + 1)) {
    const size_t end = dot.find(kEnd, at);
    if (end == std::string::npos) break;
    out.insert(dot.substr(at + kName.size(), end - at - kName.size()));
  }
  return out;
}

std::map<std::string, std::vector<std::string>> optimizer_passes(const BuiltNetwork& built,
                                                                 const std::set<std::string>& optimized) {
  std::map<std::string, std::vector<std::string>> out;
  auto note = [&](int h, const std::string& pass) {
    const std::string& node = built.layers.at(h).node;
    if (node.empty()) return;  // a graph input's layer
    std::vector<std::string>& l = out[node];
    if (std::find(l.begin(), l.end(), kFusedPrefix + pass) == l.end()) l.push_back(kFusedPrefix + pass);
  };
  std::set<std::string> made;  // layers a pass made: not named as built
  std::set<std::string> built_names;
  for (const auto& [h, l] : built.layers) built_names.insert(dot_escaped(l.name));
  for (const auto& name : built.output_names) built_names.insert(dot_escaped(name));
  for (const auto& name : optimized)
    if (!built_names.count(name)) made.insert(name);
  std::map<int, std::vector<int>> consumers;
  for (const auto& [h, l] : built.layers)
    for (int i : l.inputs) consumers[i].push_back(h);
  const std::set<int> live = live_layers(built);
  const std::map<int, std::vector<std::string>> named = named_by(built, made);
  for (const auto& [h, l] : built.layers) {
    if (l.node.empty() || !live.count(h)) continue;
    // Named by a layer a pass made, whether or not it stays itself (it does where an output needs it).
    if (const auto it = named.find(h); it != named.end()) {
      for (const auto& pass : it->second) {
        note(h, pass);
        // The layer a transpose moved above now computes on transposed data.
        if (pass == std::string("MoveTransposeUp") && !l.inputs.empty()) note(l.inputs[0], pass);
      }
      continue;
    }
    if (optimized.count(dot_escaped(l.name))) continue;
    int sibling = -1;
    for (const auto& pass : bypass_passes(built, consumers, h, sibling)) {
      note(h, pass);
      if (sibling >= 0) note(sibling, pass);
    }
  }
  return out;
}

}  // namespace quorum::backends::armnn_lower
