// The shapes & parameters calculator: attribute draws fitted to the input, and their repair.
#include "gen/params.h"

#include "ops/kernel_util.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ops/registry.h"

namespace quorum::gen {
using ops::maybe_negative;

namespace {

using core::attr_i;
using core::attr_ints;
using core::attr_s;
using Ints = std::vector<int64_t>;

int64_t pick(core::Rng& rng, std::initializer_list<int64_t> v) {
  return *(v.begin() + static_cast<std::ptrdiff_t>(rng.index(v.size())));
}

Ints divisors(int64_t n) {
  Ints d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Random dims (each >= 1) whose product is n, at most `rank` of them (exactly `rank` when n allows).
Ints factorise(core::Rng& rng, int64_t n, int rank) {
  Ints primes;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      primes.push_back(p);
      n /= p;
    }
  if (n > 1) primes.push_back(n);
  Ints dims(static_cast<size_t>(std::max(rank, 1)), 1);
  for (int64_t p : primes) dims[rng.index(dims.size())] *= p;
  return dims;
}

// ---- windowed operators: conv, conv_transpose, pools ---------------------------------------

// The fixed list `name` when it has one entry per spatial axis.
const Ints* fixed_list(const Attrs& fixed, const std::string& name, size_t r) {
  auto it = fixed.find(name);
  if (it == fixed.end() || !std::holds_alternative<Ints>(it->second)) return nullptr;
  const Ints& v = std::get<Ints>(it->second);
  return v.size() == r ? &v : nullptr;
}

void draw_window(const ops::OpSpec& spec, const Shape& x, core::Rng& rng, const Limits& lim, const Want& want,
                 const Attrs& fixed, Attrs& a) {
  const int sr = spatial_rank(spec);
  if (static_cast<int>(x.size()) != sr + 2) return;  // the shape rule names the rank problem
  const auto r = static_cast<size_t>(sr);
  const bool conv = spec.has_tag("conv");
  const bool transposed = spec.attr("output_padding") != nullptr;
  const bool has_dilation = spec.attr("dilations") != nullptr;
  const bool cons = want.conservative;
  const bool keep = want.keep_spatial && !cons;
  std::string auto_pad = spec.attr("auto_pad") && a.count("auto_pad") ? attr_s(a, "auto_pad") : "NOTSET";
  if (keep) auto_pad = spec.attr("auto_pad") && rng.bernoulli(0.3) ? (rng.bernoulli(0.5) ? "SAME_UPPER" : "SAME_LOWER")
                                                                   : "NOTSET";
  if (cons) auto_pad = "NOTSET";
  if (auto it = fixed.find("auto_pad"); it != fixed.end() && std::holds_alternative<std::string>(it->second))
    auto_pad = std::get<std::string>(it->second);
  const Ints* fixed_k = fixed_list(fixed, "kernel_shape", r);
  const Ints* fixed_s = fixed_list(fixed, "strides", r);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  Ints k(r), s(r), d(r, 1), pads(2 * r, 0), out_pad(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = x[2 + i];
    k[i] = cons ? 1 : pick(rng, {1, 2, 3, 3, 3, 5});
    // Without padding that restores the size, the window must fit inside the input.
    if (!keep && !same) k[i] = std::min(k[i], in);
    if (fixed_k) k[i] = (*fixed_k)[i];
    s[i] = cons || keep ? 1 : pick(rng, {1, 1, 1, 2, 2, 3});
    s[i] = std::min(s[i], std::max<int64_t>(in, 1));
    if (fixed_s) s[i] = (*fixed_s)[i];
    if (has_dilation && !cons) d[i] = pick(rng, {1, 1, 1, 2});
    if (!keep && d[i] * (k[i] - 1) + 1 > in) d[i] = 1;
    if (auto_pad == "NOTSET") {
      if (keep) {
        // out = in + pb + pe - d(k-1) with stride 1 (conv), and the same for the transpose.
        const int64_t total = d[i] * (k[i] - 1);
        pads[i] = rng.bernoulli(0.5) ? total / 2 : total - total / 2;
        pads[r + i] = total - pads[i];
      } else if (!cons) {
        const int64_t hi = std::min<int64_t>(k[i] - 1, 2);
        pads[i] = rng.bernoulli(0.5) ? rng.randint(0, hi) : 0;
        pads[r + i] = rng.bernoulli(0.5) ? rng.randint(0, hi) : 0;
      }
    }
    if (transposed && !keep && !cons && rng.bernoulli(0.3))
      out_pad[i] = rng.randint(0, std::max(s[i], d[i]) - 1);
  }
  a["kernel_shape"] = k;
  a["strides"] = s;
  a["pads"] = pads;
  if (has_dilation) a["dilations"] = d;
  if (spec.attr("auto_pad")) a["auto_pad"] = auto_pad;
  if (transposed) a["output_padding"] = out_pad;
  // ceil_mode only means something with explicit pads; with stride 1 it changes nothing anyway.
  if (spec.attr("ceil_mode") && (auto_pad != "NOTSET" || keep || cons)) a["ceil_mode"] = int64_t{0};
  if (!conv) return;

  const int64_t c = x[1];
  const int64_t wanted = want.channels < 0 ? c : want.channels;
  int64_t out = wanted > 0 ? wanted : rng.randint(1, lim.max_channels);
  int64_t group = 1;
  const double u = want.depthwise ? 1.0 : cons ? 0.0 : rng.uniform();
  if (want.depthwise) {
    group = c;
    out = c;
  } else if (u > 0.8 && wanted == 0) {
    // Depthwise: one group per input channel, channel multiplier 1 or 2.
    group = c;
    out = c * (c * 2 <= std::max(lim.max_channels, c) && rng.bernoulli(0.5) ? 2 : 1);
  } else if (u > 0.6) {
    // Grouped: a common divisor of both channel counts (out is adjusted when it is free).
    const Ints g = divisors(c);
    group = g[rng.index(g.size())];
    if (wanted == 0) out = group * std::max<int64_t>(1, out / group);
    if (out % group != 0) group = 1;
  }
  a["out_channels"] = out;
  a["group"] = group;
}

bool repair_window(const ops::OpSpec& spec, const Shape& x, Attrs& a) {
  const int sr = spatial_rank(spec);
  if (static_cast<int>(x.size()) != sr + 2) return false;
  const auto r = static_cast<size_t>(sr);
  const bool transposed = spec.attr("output_padding") != nullptr;
  const bool has_dilation = spec.attr("dilations") != nullptr;
  const bool pool = !spec.has_tag("conv");
  Ints k = attr_ints(a, "kernel_shape"), s = attr_ints(a, "strides"), pads = attr_ints(a, "pads");
  Ints d = has_dilation ? attr_ints(a, "dilations") : Ints(r, 1);
  Ints out_pad = transposed ? attr_ints(a, "output_padding") : Ints(r, 0);
  std::string auto_pad = spec.attr("auto_pad") ? attr_s(a, "auto_pad") : "NOTSET";
  if (k.size() != r || s.size() != r || d.size() != r || pads.size() != 2 * r || out_pad.size() != r) return false;
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = x[2 + i];
    k[i] = std::max<int64_t>(k[i], 1);
    s[i] = std::max<int64_t>(s[i], 1);
    d[i] = std::max<int64_t>(d[i], 1);
    if (auto_pad == "VALID" || auto_pad == "NOTSET") {
      int64_t& pb = pads[i];
      int64_t& pe = pads[r + i];
      if (auto_pad == "VALID") pb = pe = 0;
      if (pool) {
        pb = std::min(pb, k[i] - 1);
        pe = std::min(pe, k[i] - 1);
      }
      if (d[i] * (k[i] - 1) + 1 > in + pb + pe) d[i] = 1;
      if (k[i] > in + pb + pe) k[i] = std::max<int64_t>(1, in + pb + pe);
      if (pool) {
        pb = std::min(pb, k[i] - 1);
        pe = std::min(pe, k[i] - 1);
      }
    } else {
      pads[i] = pads[r + i] = 0;  // SAME_* ignores pads; pools require them zero
    }
    if (transposed) {
      if (out_pad[i] >= s[i] && out_pad[i] >= d[i]) out_pad[i] = 0;
      if ((in - 1) * s[i] - pads[i] - pads[r + i] + d[i] * (k[i] - 1) + 1 + out_pad[i] < 1) pads[i] = pads[r + i] = 0;
    }
  }
  a["kernel_shape"] = k;
  a["strides"] = s;
  a["pads"] = pads;
  if (has_dilation) a["dilations"] = d;
  if (transposed) a["output_padding"] = out_pad;
  if (spec.attr("group")) {
    const int64_t g = attr_i(a, "group"), out = attr_i(a, "out_channels");
    if (g < 1 || x[1] % g != 0 || out % g != 0) a["group"] = int64_t{1};
  }
  return true;
}

// ---- layout operators -------------------------------------------------------------------------

void draw_slice(const Shape& x, core::Rng& rng, Attrs& a) {
  const auto rank = static_cast<int64_t>(x.size());
  Ints axes(x.size());
  std::iota(axes.begin(), axes.end(), 0);
  rng.shuffle(axes);
  axes.resize(static_cast<size_t>(rng.randint(1, std::max<int64_t>(rank, 1))));
  const bool explicit_axes = rng.bernoulli(0.7);
  if (!explicit_axes) std::iota(axes.begin(), axes.end(), 0);
  Ints starts, ends, steps, listed;
  for (int64_t ax : axes) {
    const int64_t n = x[static_cast<size_t>(ax)];
    listed.push_back(maybe_negative(rng, ax, rank));
    if (rng.bernoulli(0.2)) {  // backwards: a negative step
      const Ints s = ops::backward_slice(n, rng);
      starts.push_back(s[0]);
      ends.push_back(s[1]);
      steps.push_back(s[2]);
      continue;
    }
    const int64_t len = rng.randint(1, n);
    const int64_t st = rng.randint(0, n - len), en = st + len;
    starts.push_back(rng.bernoulli(0.2) ? st - n : st);
    ends.push_back(en == n && rng.bernoulli(0.3) ? int64_t{1} << 30 : en);  // clamps to n
    steps.push_back(len > 2 && rng.bernoulli(0.3) ? 2 : 1);
  }
  a["starts"] = starts;
  a["ends"] = ends;
  a["axes"] = explicit_axes ? listed : Ints{};
  const bool unit = std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
  a["steps"] = rng.bernoulli(0.3) && unit ? Ints{} : steps;  // [] means every step is 1
}

void draw_pad(const Shape& x, core::Rng& rng, Attrs& a) {
  const size_t r = x.size();
  Ints pads(2 * r, 0);
  const std::string mode = a.count("mode") ? attr_s(a, "mode") : "constant";
  for (size_t d = 0; d < r; ++d) {
    // The batch axis is padded rarely: libraries support it, models never do it.
    const double p = d == 0 ? 0.1 : 0.6;
    for (size_t side : {d, d + r}) {
      if (!rng.bernoulli(p)) continue;
      int64_t v = rng.randint(1, 2);
      if (mode == "reflect") v = std::min(v, x[d] - 1);
      pads[side] = std::max<int64_t>(v, 0);
    }
  }
  a["pads"] = pads;
}

void draw_reduce_axes(const Shape& x, core::Rng& rng, Attrs& a) {
  const auto rank = static_cast<int64_t>(x.size());
  Ints axes;
  // The batch axis is reduced rarely: libraries support it, models seldom do it.
  for (int64_t d = 0; d < rank; ++d)
    if (rng.bernoulli(d == 0 && rank > 1 ? 0.1 : 0.4)) axes.push_back(maybe_negative(rng, d, rank));
  if (axes.empty()) axes.push_back(maybe_negative(rng, rng.randint(0, rank - 1), rank));
  const bool all = static_cast<int64_t>(axes.size()) == rank;
  a["axes"] = axes;
  // A rank-0 result would leave most layers nothing to work on; keep the reduced axes instead.
  if (all && a.count("keepdims")) a["keepdims"] = int64_t{1};
}

void draw_reshape(const Shape& x, core::Rng& rng, const Limits& lim, Attrs& a) {
  const int64_t n = core::numel(x);
  Ints target;
  int64_t rest = n;
  if (!x.empty() && rng.bernoulli(0.6)) {
    target.push_back(x[0]);  // keep the batch axis
    rest = n / std::max<int64_t>(x[0], 1);
  }
  const int room = lim.max_rank - static_cast<int>(target.size());
  for (int64_t d : factorise(rng, rest, static_cast<int>(rng.randint(1, std::max(1, std::min(room, 4))))))
    target.push_back(d);  // (not insert(): GCC 12 warns falsely about its memcpy)
  if (rng.bernoulli(0.3)) target[rng.index(target.size())] = -1;
  a["shape"] = target;
}

}  // namespace

int spatial_rank(const ops::OpSpec& spec) {
  const ops::AttrSpec* k = spec.attr("kernel_shape");
  if (!k) return -1;
  return static_cast<int>(std::get<Ints>(k->default_value).size());
}

Attrs draw_attrs(const ops::OpSpec& spec, const std::vector<TensorType>& in, core::Rng& rng, const Limits& lim,
                 const Want& want, const Attrs& fixed) {
  // Scalar attributes: the operator's own sampler draws valid values from its domain.
  Attrs a;
  if (!spec.attrs.empty()) {
    ops::Case c = spec.sample(rng);
    for (auto& [name, v] : c.attrs)
      if (spec.attr(name)) a[name] = std::move(v);
  }
  if (in.empty()) return a;
  const Shape& x = in[0].shape;
  const auto rank = static_cast<int64_t>(x.size());
  if (spec.attr("kernel_shape")) {
    draw_window(spec, x, rng, lim, want, fixed, a);
  } else if (spec.attr("units")) {
    a["units"] = rng.randint(1, lim.max_units);
  } else if (spec.attr("hidden_size")) {
    a["hidden_size"] = rng.randint(1, lim.max_units);
  } else if (spec.attr("starts")) {
    if (rank >= 1) draw_slice(x, rng, a);
  } else if (spec.attr("perm")) {
    Ints perm(x.size());
    std::iota(perm.begin(), perm.end(), 0);
    rng.shuffle(perm);
    a["perm"] = rng.bernoulli(0.2) ? Ints{} : perm;
  } else if (spec.attr("shape")) {
    draw_reshape(x, rng, lim, a);
  } else if (spec.attr("pads")) {
    draw_pad(x, rng, a);
  } else if (spec.fit_attrs) {
    spec.fit_attrs(x, rng, lim.max_rank, a);
  } else if (spec.attr("axes") && rank >= 1) {
    draw_reduce_axes(x, rng, a);
  } else if (spec.attr("axis") && rank >= 1) {
    a["axis"] = maybe_negative(rng, rng.randint(0, rank - 1), rank);
  }
  return a;
}

bool repair_attrs(const ops::OpSpec& spec, const std::vector<TensorType>& in, Attrs& a) {
  if (in.empty()) return false;
  const Shape& x = in[0].shape;
  if (spec.attr("kernel_shape")) return repair_window(spec, x, a);
  bool changed = false;
  // batch_norm in training mode needs more than one value per channel.
  if (spec.attr("training") && attr_i(a, "training") == 1) {
    a["training"] = int64_t{0};
    changed = true;
  }
  // reflect padding needs pads smaller than the axis.
  if (spec.attr("mode") && spec.attr("pads") && attr_s(a, "mode") == "reflect") {
    a["mode"] = std::string("edge");
    changed = true;
  }
  if (spec.repair_attrs && spec.repair_attrs(a)) changed = true;
  return changed;
}

const std::vector<int>& accepted_ranks(const ops::OpSpec& spec) {
  static const std::map<std::string, std::vector<int>> table = [] {
    std::map<std::string, std::vector<int>> t;
    const int64_t dims[] = {2, 3, 6, 6, 6};
    for (const ops::OpSpec* s : ops::catalogue().all()) {
      std::vector<int>& ranks = t[s->name];
      if (s->multi_input() || s->is_loss) continue;
      for (int r = 1; r <= 5; ++r) {
        const std::vector<TensorType> in{{core::DType::F32, Shape(dims, dims + r)}};
        core::Rng rng(0x5EED0000u + static_cast<uint64_t>(r));
        bool ok = false;
        for (int attempt = 0; attempt < 4 && !ok; ++attempt) {
          Want w;
          w.conservative = attempt >= 2;
          try {
            const Attrs a = ops::canonical_attrs(*s, draw_attrs(*s, in, rng, Limits{}, w));
            s->infer(in, a);
            ok = true;
          } catch (const core::OpError&) {
          }
        }
        if (ok) ranks.push_back(r);
      }
    }
    return t;
  }();
  static const std::vector<int> none;
  auto it = table.find(spec.name);
  return it == table.end() ? none : it->second;
}

}  // namespace quorum::gen
