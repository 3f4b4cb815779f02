// Audee's seed models built in code, and its network-level mutation. Models 0..6 are the seven
// architectures as published (widths reduced so that the float64 reference runs them quickly on
// 32x32 inputs; docs/generators.md lists each reduction); every later model takes architecture
// index % 7 and re-combines each layer's parameters: every attribute of every layer keeps its
// published value or takes one drawn from its domain (fitted to the layer's input), half and half,
// and the builder repairs what no longer fits. With --invalid-params one attribute of one layer per
// model gets one of its domain's deliberately invalid values; every library should reject such a
// model.
#include <algorithm>
#include <set>

#include "gen/factories.h"
#include "ops/registry.h"

namespace quorum::gen {
namespace {

using Ints = std::vector<int64_t>;

// Layers of one architecture, published (canonical) or re-combined.
class Net {
 public:
  Net(Builder& b, core::Rng& rng, bool recombine) : b_(b), rng_(rng), recombine_(recombine) {}

  // `fixed` layers keep their attributes (the classifier's width, the reshaping before it).
  Vid L(const std::string& op, const std::vector<Vid>& in, const Attrs& canon = {}, bool fixed = false) {
    const ops::OpSpec& spec = ops::op(op);
    if (recombine_ && !fixed && !spec.attrs.empty()) {
      std::vector<TensorType> types;
      for (Vid v : in) types.push_back(b_.type(v));
      const Attrs drawn = draw_attrs(spec, types, rng_, b_.limits(), {});
      Attrs mixed = ops::canonical_attrs(spec, canon);
      for (const auto& [k, v] : drawn)
        if (rng_.bernoulli(0.5)) mixed[k] = v;
      if (auto v = b_.adapt(spec, in, mixed)) return *v;
    }
    if (auto v = b_.adapt(spec, in, canon)) return *v;
    return in[0];
  }

  Vid conv(Vid x, int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t group = 1) {
    return L("conv2d", {x},
             {{"out_channels", out},
              {"kernel_shape", Ints{k, k}},
              {"strides", Ints{stride, stride}},
              {"pads", Ints{pad, pad, pad, pad}},
              {"group", group}});
  }
  Vid bn(Vid x) { return L("batch_norm", {x}); }
  Vid act(const std::string& op, Vid x) { return L(op, {x}); }
  Vid max_pool(Vid x) { return L("max_pool2d", {x}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}); }
  Vid dense(Vid x, int64_t units) { return L("dense", {x}, {{"units", units}}); }
  Vid flatten(Vid x) { return L("flatten", {x}, {{"axis", int64_t{1}}}, true); }
  Builder& builder() { return b_; }

 private:
  Builder& b_;
  core::Rng& rng_;
  bool recombine_;
};

// LeNet-5 at full width: conv 6@5x5, pool, conv 16@5x5, pool, dense 120, 84 (the classifier follows).
Vid lenet5(Net& n, Vid x) {
  x = n.max_pool(n.act("relu", n.conv(x, 6, 5, 1, 0)));
  x = n.max_pool(n.act("relu", n.conv(x, 16, 5, 1, 0)));
  x = n.flatten(x);
  x = n.act("relu", n.dense(x, 120));
  return n.act("relu", n.dense(x, 84));
}

// ResNet-20 (CIFAR): three stages of three basic blocks, widths 4/8/16 instead of 16/32/64; a
// 1x1 projection where a stage changes size (option B).
Vid resnet20(Net& n, Vid x) {
  const int64_t widths[] = {4, 8, 16};
  x = n.act("relu", n.bn(n.conv(x, widths[0], 3, 1, 1)));
  for (int s = 0; s < 3; ++s)
    for (int blk = 0; blk < 3; ++blk) {
      const int64_t stride = s > 0 && blk == 0 ? 2 : 1, w = widths[s];
      Vid y = n.act("relu", n.bn(n.conv(x, w, 3, stride, 1)));
      y = n.bn(n.conv(y, w, 3, 1, 1));
      Vid shortcut = x;
      if (stride != 1 || n.builder().shape(x)[1] != w) shortcut = n.bn(n.conv(x, w, 1, stride, 0));
      x = n.act("relu", n.L("add", {shortcut, y}));
    }
  return n.L("global_avg_pool", {x});
}

// VGG-16: 13 convolutions in five blocks, widths 4/8/16/32/32 instead of 64/128/256/512/512, and
// fully connected layers of 64 instead of 4096.
Vid vgg16(Net& n, Vid x) {
  const std::vector<std::vector<int64_t>> cfg = {{4, 4}, {8, 8}, {16, 16, 16}, {32, 32, 32}, {32, 32, 32}};
  for (const auto& block : cfg) {
    for (int64_t w : block) x = n.act("relu", n.conv(x, w, 3, 1, 1));
    x = n.max_pool(x);
  }
  x = n.flatten(x);
  x = n.act("relu", n.dense(x, 64));
  return n.act("relu", n.dense(x, 64));
}

// MobileNet-V2: the published 17 inverted-residual blocks (expansion 6, depthwise 3x3), every
// width divided by 8 (at least 2): stem 4, blocks 2/3/4/8/12/20/40, last 1x1 convolution 160.
Vid mobilenet_v2(Net& n, Vid x) {
  struct Stage {
    int64_t t, c, reps, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  x = n.act("relu6", n.bn(n.conv(x, 4, 3, 2, 1)));
  for (const Stage& st : stages) {
    const int64_t c = std::max<int64_t>(2, st.c / 8);
    for (int64_t i = 0; i < st.reps; ++i) {
      const int64_t stride = i == 0 ? st.s : 1, cin = n.builder().shape(x)[1], hidden = cin * st.t;
      Vid y = x;
      if (st.t != 1) y = n.act("relu6", n.bn(n.conv(y, hidden, 1, 1, 0)));
      y = n.act("relu6", n.bn(n.conv(y, n.builder().shape(y)[1], 3, stride, 1, n.builder().shape(y)[1])));
      y = n.bn(n.conv(y, c, 1, 1, 0));
      if (stride == 1 && cin == c) y = n.L("add", {x, y});
      x = y;
    }
  }
  x = n.act("relu6", n.bn(n.conv(x, 160, 1, 1, 0)));
  return n.L("global_avg_pool", {x});
}

// Two stacked recurrent layers of 16 units (the second returns its last state only).
Vid recurrent(Net& n, Vid x, const std::string& op) {
  x = n.L(op, {x}, {{"hidden_size", int64_t{16}}, {"return_sequences", int64_t{1}}});
  return n.L(op, {x}, {{"hidden_size", int64_t{16}}, {"return_sequences", int64_t{0}}});
}

struct Arch {
  const char* name;
  bool image;
  Vid (*build)(Net&, Vid);
};

const Arch kArchs[] = {
    {"lenet5", true, lenet5},
    {"resnet20", true, resnet20},
    {"vgg16", true, vgg16},
    {"mobilenet_v2", true, mobilenet_v2},
    {"simple_rnn", false, [](Net& n, Vid x) { return recurrent(n, x, "simple_rnn"); }},
    {"lstm", false, [](Net& n, Vid x) { return recurrent(n, x, "lstm"); }},
    {"gru", false, [](Net& n, Vid x) { return recurrent(n, x, "gru"); }},
};
constexpr size_t kArchCount = sizeof(kArchs) / sizeof(kArchs[0]);

class Zoo : public Generator {
 public:
  Zoo(const GenOptions& opt, const data::Source& source) : opt_(opt), source_(source) {}

  std::string name() const override { return "zoo"; }

  std::vector<std::string> operators() const override {
    // The published architectures with their output layers, built once to list their operators.
    std::set<std::string> ops;
    Zoo plain(opt_, source_);
    plain.opt_.invalid_params = false;
    for (size_t i = 0; i < kArchCount; ++i) {
      core::Rng rng(i + 1);
      for (const auto& n : plain.generate(i, rng).graph.nodes) ops.insert(n.op);
    }
    return {ops.begin(), ops.end()};
  }

  Model generate(uint64_t index, core::Rng& rng) override {
    const Arch& arch = kArchs[index % kArchCount];
    const bool recombine = index >= kArchCount;
    const data::DataSpec d = source_.spec(rng, arch.image ? data::Want::Image32 : data::Want::Sequence);
    // Published models exceed the random generators' size limits; the limits bound re-drawn layers.
    Limits lim = opt_.limits;
    lim.max_elems = std::max<int64_t>(lim.max_elems, 2 * 6 * 32 * 32 * 2);
    lim.max_params = std::max<int64_t>(lim.max_params, 400 * 120);
    Builder b(rng, lim);
    Net net(b, rng, recombine);
    const Vid x = b.input(d.input);
    b.output(b.head(arch.build(net, x), d));
    Model m = b.finish(std::string(arch.name) + (recombine ? "_recombined_" : "_") + std::to_string(index), d);
    if (opt_.invalid_params) make_invalid(m, rng);
    return m;
  }

 private:
  // One attribute of one layer gets one of its domain's deliberately invalid values.
  static void make_invalid(Model& m, core::Rng& rng) {
    std::vector<size_t> cand;
    for (size_t i = 0; i < m.graph.nodes.size(); ++i)
      for (const auto& a : ops::op(m.graph.nodes[i].op).attrs)
        if (!a.invalid.empty()) {
          cand.push_back(i);
          break;
        }
    if (cand.empty()) return;
    ir::Node& n = m.graph.nodes[cand[rng.index(cand.size())]];
    std::vector<const ops::AttrSpec*> attrs;
    for (const auto& a : ops::op(n.op).attrs)
      if (!a.invalid.empty()) attrs.push_back(&a);
    const ops::AttrSpec& a = *attrs[rng.index(attrs.size())];
    const core::AttrValue& v = a.invalid[rng.index(a.invalid.size())];
    n.attrs[a.name] = v;
    m.invalid_by_design = true;
    m.note = "node '" + n.name + "' (" + n.op + "): " + a.name + " = " + core::to_string(v) + " (deliberately invalid)";
  }

  GenOptions opt_;
  const data::Source& source_;
};

}  // namespace

const std::vector<std::string>& zoo_architectures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Arch& a : kArchs) v.push_back(a.name);
    return v;
  }();
  return names;
}

std::unique_ptr<Generator> make_zoo(const GenOptions& opt, const data::Source& source) {
  return std::make_unique<Zoo>(opt, source);
}

}  // namespace quorum::gen
