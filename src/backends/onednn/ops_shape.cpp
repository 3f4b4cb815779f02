// Shape operators. reshape / flatten / squeeze / unsqueeze reinterpret the buffer (no data moves).
// transpose, slice and pad move data with oneDNN reorders between strided views: a transpose is a
// view with permuted strides, a slice a view with an offset (and, with steps, a staging buffer), a pad a copy
// into the interior view of the output (reflect and edge then copy border slices axis by axis).
// Backward reorders the other way; pad's mirrored borders accumulate with a sum post-op. The
// forward of reshape and transpose, and their backward (the same buffer; the inverse transpose),
// are the lowering's steps (lower.cpp).
#include <algorithm>

#include "backends/onednn/onednn_sink.h"

namespace quorum::backends::onednn {
namespace {

// A stepped slice cannot always be one strided view: oneDNN wants each stride to enclose the next
// dim's extent, and stride*step over count elements can overrun the enclosing dim. So a slice
// with steps copies the box [start, start + count*step) (clipped to the input) into a staging
// buffer whose axes are exactly count*step long, and then takes every step-th element of that
// buffer, a view that always nests. Without steps the box itself is the answer.
class SliceKernel : public Kernel {
 public:
  SliceKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    const Shape& x = in_shape(0);
    const Shape& y = out_shape(0);
    const int rank = static_cast<int>(x.size());
    const auto& starts = core::attr_ints(attrs(), "starts");
    const auto& axes = core::attr_ints(attrs(), "axes");
    const auto& steps = core::attr_ints(attrs(), "steps");
    const Dims xs = dense_strides(dims_of(x));
    Dims start(x.size(), 0), step(x.size(), 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      const auto d = static_cast<size_t>(axes.empty() ? static_cast<int>(i) : ops::norm_axis(axes[i], rank));
      const int64_t len = x[d];
      // ONNX: a negative start counts from the end, then clamps to [0, len].
      start[d] = std::clamp<int64_t>(starts[i] < 0 ? starts[i] + len : starts[i], 0, len);
      step[d] = steps.empty() ? 1 : steps[i];
      stepped_ = stepped_ || step[d] > 1;
    }
    Dims box(x.size());
    for (size_t d = 0; d < x.size(); ++d) {
      staging_.push_back(y[d] * step[d]);
      box[d] = std::min(staging_.back(), x[d] - start[d]);
      offset_ += start[d] * xs[d];
    }
    box_ = View{nullptr, stepped_ ? box : dims_of(y), xs};
    if (stepped_) {
      const Dims ss = dense_strides(staging_);
      staged_box_ = View{nullptr, box, ss};
      Dims st = ss;
      for (size_t d = 0; d < st.size(); ++d) st[d] *= step[d];
      picks_ = View{nullptr, dims_of(y), st};
    }
  }

  void forward(Env& env, bool) override {
    Buf y(out_shape(0));
    const View src = at(box_, const_cast<float*>(in(env, 0).ptr()) + offset_);
    if (!stepped_) {
      copy_view(src, view_of(y));
    } else {
      Buf stage(Shape(staging_.begin(), staging_.end()));
      copy_view(src, at(staged_box_, stage.ptr()));
      copy_view(at(picks_, stage.ptr()), view_of(y));
    }
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    Buf gx(in_shape(0));
    const View dst = at(box_, gx.ptr() + offset_);
    if (!stepped_) {
      copy_view(view_of(*gout(env, 0)), dst);
    } else {
      Buf stage(Shape(staging_.begin(), staging_.end()));
      copy_view(view_of(*gout(env, 0)), at(picks_, stage.ptr()));
      copy_view(at(staged_box_, stage.ptr()), dst);
    }
    add_gin(env, 0, std::move(gx));
  }

 private:
  static View at(View v, float* p) {
    v.ptr = p;
    return v;
  }

  bool stepped_ = false;
  Dims staging_;
  View box_, staged_box_, picks_;
  int64_t offset_ = 0;
};

class PadKernel : public Kernel {
 public:
  PadKernel(const ir::Graph& g, const ir::Node& n) : Kernel(g, n) {
    const size_t r = in_shape(0).size();
    const auto& pads = core::attr_ints(attrs(), "pads");
    begin_ = pads.empty() ? Dims(r, 0) : Dims(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
    mode_ = core::attr_s(attrs(), "mode");
    value_ = static_cast<float>(core::attr_f(attrs(), "value"));
  }

  void forward(Env& env, bool) override {
    Buf y(out_shape(0));
    if (mode_ == "constant") std::fill(y.data.begin(), y.data.end(), value_);
    copy_view(view_of(in(env, 0)), interior(y));
    if (mode_ != "constant")
      for (size_t d = 0; d < begin_.size(); ++d)
        for (const auto& [dst, src] : border_slices(d)) copy_view(slab(y, d, src), slab(y, d, dst));
    set_out(env, 0, std::move(y));
  }

  void backward(Env& env) override {
    Buf g = *gout(env, 0);
    // The transpose of forward: border slices, last axis first, add onto the slices they copied.
    if (mode_ != "constant")
      for (size_t d = begin_.size(); d-- > 0;)
        for (const auto& [dst, src] : border_slices(d)) copy_view(slab(g, d, dst), slab(g, d, src), true);
    Buf gx(in_shape(0));
    copy_view(interior(g), view_of(gx));
    add_gin(env, 0, std::move(gx));
  }

 private:
  // The input-sized window of an output-sized buffer.
  View interior(Buf& y) const {
    View v = view_of(y);
    v.dims = dims_of(in_shape(0));
    for (size_t d = 0; d < begin_.size(); ++d) v.ptr += begin_[d] * v.strides[d];
    return v;
  }
  View interior(const Buf& y) const { return interior(const_cast<Buf&>(y)); }

  // The slice at output index `at` along axis d: full extent on axes before d (already padded),
  // interior extent on axes after d (not yet padded).
  View slab(Buf& y, size_t d, int64_t at) const {
    View v = view_of(y);
    for (size_t k = 0; k < begin_.size(); ++k) {
      if (k == d) {
        v.dims[k] = 1;
        v.ptr += at * v.strides[k];
      } else if (k > d) {
        v.dims[k] = in_shape(0)[k];
        v.ptr += begin_[k] * v.strides[k];
      }
    }
    return v;
  }

  // (padded output index, output index it copies) along axis d.
  std::vector<std::pair<int64_t, int64_t>> border_slices(size_t d) const {
    const int64_t n = in_shape(0)[d], b = begin_[d], total = out_shape(0)[d];
    std::vector<std::pair<int64_t, int64_t>> v;
    for (int64_t j = 0; j < total; ++j) {
      int64_t i = j - b;
      if (i >= 0 && i < n) continue;
      if (mode_ == "reflect")
        i = i < 0 ? -i : 2 * (n - 1) - i;  // mirror without repeating the edge
      else
        i = std::clamp<int64_t>(i, 0, n - 1);  // edge: repeat the border element
      v.emplace_back(j, i + b);
    }
    return v;
  }

  Dims begin_;
  std::string mode_;
  float value_ = 0;
};

}  // namespace

void register_shape(OpTable& t) {
  for (const char* name : {"reshape", "flatten", "squeeze", "unsqueeze"})
    t[name] = OpEntry{maker<LoweredKernel>(), {}, {}};
  t["transpose"] = OpEntry{maker<LoweredKernel>(), {}, {}};
  // A slice is a reorder of a strided view of its input; oneDNN's memory descriptors have no negative strides.
  t["slice"] = OpEntry{maker<SliceKernel>(),
                       [](const ir::Graph&, const ir::Node& n) {
                         for (int64_t s : core::attr_ints(n.attrs, "steps"))
                           if (s < 0)
                             return Support::no("oneDNN 2.6's memory descriptors have no negative strides (a slice "
                                                "is a reorder of a strided view): steps " +
                                                core::to_string(core::AttrValue(core::attr_ints(n.attrs, "steps"))));
                         return Support::yes();
                       },
                       {}};
  t["pad"] = OpEntry{maker<PadKernel>(), {}, {}};
}

}  // namespace quorum::backends::onednn
