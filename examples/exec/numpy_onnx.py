"""Quorum exec-backend runner: a small ONNX interpreter written in NumPy, an engine that supports
part of the catalogue.

usage: quorum fuzz --backends exec:/usr/bin/python3+examples/exec/numpy_onnx.py ...            (per model)
       quorum fuzz --backends exec:persistent+/usr/bin/python3+examples/exec/numpy_onnx.py ... (persistent)

Per model, Quorum runs `/usr/bin/python3 examples/exec/numpy_onnx.py DIR`: DIR holds model.onnx and
input_<i>.npy, this writes output_<j>.npy (every graph output, intermediates included). In the
persistent mode (QUORUM_EXEC_PROTOCOL=persistent in the environment, no DIR argument) the
interpreter starts once and reads one DIR per line on stdin, answering one line per model on
stdout: "0", or "STATUS MESSAGE". docs/exec-backend.md has the whole protocol.

It evaluates about fifty ONNX operators (OPS below) in the model's precision. Anything else is
refused with exit status 4 and the line "unsupported: OpType" (or "unsupported: OpType attr=value"
for an attribute value it does not handle, such as Conv's auto_pad=SAME_UPPER) on stderr: Quorum
records the refusal as the engine's abstention, not as a finding, and a campaign stops sending it
models with that operator. --unsupported-status=3 makes it answer refusals the old way, exit
status 3 (a conversion failure), for comparison.
"""
import os
import sys
import traceback

import numpy as np
import onnx
from onnx import numpy_helper

EXIT_UNSUPPORTED = 4


class Unsupported(Exception):
    """An operator, or one attribute value of an operator, this interpreter does not implement."""

    def __init__(self, op, attr=None, value=None):
        super().__init__(f"{op} {attr}={value}" if attr else op)
        self.line = f"unsupported: {op}" + (f" {attr}={value}" if attr else "")


# --- operators -----------------------------------------------------------------------------------

def unary(f):
    return lambda x, a: f(x[0])


def reduce_op(f):
    def run(x, a, axes_input=False):
        axes = a.get("axes")
        if axes_input and len(x) > 1 and x[1] is not None:
            axes = list(x[1])
        keep = bool(a.get("keepdims", 1))
        if axes is None or len(axes) == 0:
            if a.get("noop_with_empty_axes", 0):
                return x[0]
            axes = None
        else:
            axes = tuple(int(i) for i in axes)
        return f(x[0], axis=axes, keepdims=keep)
    return run


def gemm(x, a):
    A, B = x[0], x[1]
    if a.get("transA", 0):
        A = A.T
    if a.get("transB", 0):
        B = B.T
    y = a.get("alpha", 1.0) * (A @ B)
    if len(x) > 2 and x[2] is not None:
        y = y + a.get("beta", 1.0) * x[2]
    return y


def softmax(x, a):
    axis = a.get("axis", -1)
    m = np.max(x[0], axis=axis, keepdims=True)
    e = np.exp(x[0] - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, a):
    axis = a.get("axis", -1)
    s = x[0] - np.max(x[0], axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def clip(x, a):
    y = x[0]
    lo = x[1] if len(x) > 1 and x[1] is not None else None
    hi = x[2] if len(x) > 2 and x[2] is not None else None
    if lo is not None:
        y = np.maximum(y, lo)
    if hi is not None:
        y = np.minimum(y, hi)
    return y


def reshape(x, a):
    shape = [int(s) for s in x[1]]
    if not a.get("allowzero", 0):
        shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x[0].reshape(shape)


def flatten(x, a):
    axis = a.get("axis", 1) % max(x[0].ndim, 1) if a.get("axis", 1) < 0 else a.get("axis", 1)
    lead = int(np.prod(x[0].shape[:axis])) if axis > 0 else 1
    return x[0].reshape(lead, -1)


def squeeze(x, a):
    axes = x[1] if len(x) > 1 and x[1] is not None else a.get("axes")
    if axes is None:
        return np.squeeze(x[0])
    return np.squeeze(x[0], axis=tuple(int(i) for i in axes))


def unsqueeze(x, a):
    axes = x[1] if len(x) > 1 and x[1] is not None else a.get("axes")
    y = x[0]
    rank = y.ndim + len(axes)
    for ax in sorted(int(i) % rank for i in axes):
        y = np.expand_dims(y, ax)
    return y


def slice_op(x, a):
    data, starts, ends = x[0], x[1], x[2]
    axes = x[3] if len(x) > 3 and x[3] is not None else range(len(starts))
    steps = x[4] if len(x) > 4 and x[4] is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax, s, e, st = int(ax) % data.ndim, int(s), int(e), int(st)
        n = data.shape[ax]
        # ONNX clamps starts and ends into the dimension; Python slicing does the same for one step sign.
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
        else:
            s, e = min(max(s, -1), n - 1), min(max(e, -1), n - 1)
            e = None if e < 0 else e
        index[ax] = slice(s, e, st)
    return data[tuple(index)]


def pad(x, a):
    data, pads = x[0], [int(p) for p in x[1]]
    value = x[2].item() if len(x) > 2 and x[2] is not None and x[2].size else 0
    mode = a.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    r = data.ndim
    width = [(pads[i], pads[i + r]) for i in range(r)]
    if any(p < 0 for pair in width for p in pair):
        raise Unsupported("Pad", "pads", "negative")
    if mode == "constant":
        return np.pad(data, width, mode="constant", constant_values=value)
    if mode in ("edge", "reflect"):
        return np.pad(data, width, mode=mode)
    raise Unsupported("Pad", "mode", mode)


def concat(x, a):
    return np.concatenate(x, axis=a["axis"])


def transpose(x, a):
    return np.transpose(x[0], a.get("perm"))


def batch_norm(x, a):
    X, scale, bias, mean, var = x[:5]
    shape = [1, -1] + [1] * (X.ndim - 2)
    eps = np.asarray(a.get("epsilon", 1e-5), dtype=X.dtype)
    return (X - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)


def window_attrs(op, a, spatial):
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad != "NOTSET":
        raise Unsupported(op, "auto_pad", auto_pad)
    if a.get("ceil_mode", 0):
        raise Unsupported(op, "ceil_mode", a["ceil_mode"])
    strides = list(a.get("strides", [1] * spatial))
    dil = list(a.get("dilations", [1] * spatial))
    pads = list(a.get("pads", [0] * 2 * spatial))
    return strides, dil, pads


def windows(X, kernel, strides, dil, pads, fill):
    """Every window of X (N, C, *spatial) as an array (N, C, *out, *kernel), padded with `fill`."""
    s = len(kernel)
    width = [(0, 0), (0, 0)] + [(pads[i], pads[i + s]) for i in range(s)]
    P = np.pad(X, width, mode="constant", constant_values=fill)
    out = [(P.shape[2 + i] - dil[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(s)]
    W = np.empty(X.shape[:2] + tuple(out) + tuple(kernel), dtype=X.dtype)
    for k in np.ndindex(*kernel):
        index = [slice(None), slice(None)]
        for i in range(s):
            start = k[i] * dil[i]
            index.append(slice(start, start + strides[i] * (out[i] - 1) + 1, strides[i]))
        W[(Ellipsis,) + k] = P[tuple(index)]
    return W


def conv(x, a):
    X, Wt = x[0], x[1]
    s = X.ndim - 2
    strides, dil, pads = window_attrs("Conv", a, s)
    kernel = list(Wt.shape[2:])
    group = a.get("group", 1)
    win = windows(X, kernel, strides, dil, pads, 0)  # N, C, *out, *k
    n, c = X.shape[:2]
    m = Wt.shape[0]
    out_sp = win.shape[2:2 + s]
    cg, mg = c // group, m // group
    parts = []
    for g in range(group):
        wg = win[:, g * cg:(g + 1) * cg]  # N, cg, *out, *k
        kg = Wt[g * mg:(g + 1) * mg]  # mg, cg, *k
        wg = np.moveaxis(wg, 1, 1 + s)  # N, *out, cg, *k
        flat = wg.reshape(n, int(np.prod(out_sp)), -1)
        y = flat @ kg.reshape(mg, -1).T  # N, P, mg
        parts.append(np.moveaxis(y, 2, 1).reshape((n, mg) + tuple(out_sp)))
    Y = np.concatenate(parts, axis=1)
    if len(x) > 2 and x[2] is not None:
        Y = Y + x[2].reshape([1, -1] + [1] * s)
    return Y


def max_pool(x, a):
    if a.get("storage_order", 0):
        raise Unsupported("MaxPool", "storage_order", a["storage_order"])
    X = x[0]
    s = X.ndim - 2
    strides, dil, pads = window_attrs("MaxPool", a, s)
    win = windows(X, list(a["kernel_shape"]), strides, dil, pads, -np.inf)
    return win.reshape(win.shape[:2 + s] + (-1,)).max(axis=-1)


def average_pool(x, a):
    X = x[0]
    s = X.ndim - 2
    strides, dil, pads = window_attrs("AveragePool", a, s)
    kernel = list(a["kernel_shape"])
    win = windows(X, kernel, strides, dil, pads, 0)
    total = win.reshape(win.shape[:2 + s] + (-1,)).sum(axis=-1)
    if a.get("count_include_pad", 0):
        return total / np.asarray(np.prod(kernel), dtype=X.dtype)
    ones = np.ones((1, 1) + X.shape[2:], dtype=X.dtype)
    count = windows(ones, kernel, strides, dil, pads, 0)
    count = count.reshape(count.shape[:2 + s] + (-1,)).sum(axis=-1)
    return total / count


def global_pool(f):
    return lambda x, a: f(x[0], axis=tuple(range(2, x[0].ndim)), keepdims=True)


def elu(x, a):
    al = a.get("alpha", 1.0)
    return np.where(x[0] > 0, x[0], al * np.expm1(np.minimum(x[0], 0)))


def selu(x, a):
    al, g = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
    return g * np.where(x[0] > 0, x[0], al * np.expm1(np.minimum(x[0], 0)))


def cast(x, a):
    return x[0].astype(onnx.helper.tensor_dtype_to_np_dtype(a["to"]))


def variadic(f):
    def run(x, a):
        y = x[0]
        for v in x[1:]:
            y = f(y, v)
        return y
    return run


OPS = {
    "Identity": unary(lambda v: v),
    "Relu": unary(lambda v: np.maximum(v, 0)),
    "Sigmoid": unary(lambda v: 1 / (1 + np.exp(-v))),
    "Tanh": unary(np.tanh),
    "Abs": unary(np.abs),
    "Neg": unary(np.negative),
    "Exp": unary(np.exp),
    "Log": unary(np.log),
    "Sqrt": unary(np.sqrt),
    "Reciprocal": unary(np.reciprocal),
    "Softplus": unary(lambda v: np.logaddexp(v, 0)),
    "Softsign": unary(lambda v: v / (1 + np.abs(v))),
    "Elu": elu,
    "Selu": selu,
    "LeakyRelu": lambda x, a: np.where(x[0] >= 0, x[0], a.get("alpha", 0.01) * x[0]),
    "HardSigmoid": lambda x, a: np.clip(a.get("alpha", 0.2) * x[0] + a.get("beta", 0.5), 0, 1),
    "Clip": clip,
    "Pow": lambda x, a: np.power(x[0], x[1]),
    "Add": lambda x, a: x[0] + x[1],
    "Sub": lambda x, a: x[0] - x[1],
    "Mul": lambda x, a: x[0] * x[1],
    "Div": lambda x, a: x[0] / x[1],
    "Sum": variadic(np.add),
    "Max": variadic(np.maximum),
    "Min": variadic(np.minimum),
    "MatMul": lambda x, a: np.matmul(x[0], x[1]),
    "Gemm": gemm,
    "Softmax": softmax,
    "LogSoftmax": log_softmax,
    "Reshape": reshape,
    "Flatten": flatten,
    "Squeeze": squeeze,
    "Unsqueeze": unsqueeze,
    "Transpose": transpose,
    "Concat": concat,
    "Slice": slice_op,
    "Pad": pad,
    "Cast": cast,
    "BatchNormalization": batch_norm,
    "Conv": conv,
    "MaxPool": max_pool,
    "AveragePool": average_pool,
    "GlobalAveragePool": global_pool(np.mean),
    "GlobalMaxPool": global_pool(np.max),
    "ReduceMean": reduce_op(np.mean),
    "ReduceMax": reduce_op(np.max),
    "ReduceMin": reduce_op(np.min),
    "ReduceProd": reduce_op(np.prod),
    "ReduceSum": lambda x, a: reduce_op(np.sum)(x, a, axes_input=True),
}


# --- running one model ---------------------------------------------------------------------------

def check_supported(graph):
    """Refuses the model up front, naming the first operator this interpreter does not have."""
    for n in graph.node:
        if n.op_type != "Constant" and n.op_type not in OPS:
            raise Unsupported(n.op_type)


def run_model(d):
    graph = onnx.load(os.path.join(d, "model.onnx")).graph
    check_supported(graph)
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for i, vi in enumerate(graph.input):
        if vi.name not in values:
            values[vi.name] = np.load(os.path.join(d, f"input_{i}.npy"))
    with np.errstate(all="ignore"):
        for n in graph.node:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            if n.op_type == "Constant":
                values[n.output[0]] = numpy_helper.to_array(attrs["value"])
                continue
            inputs = [values[i] if i else None for i in n.input]
            y = OPS[n.op_type](inputs, attrs)
            dtype = inputs[0].dtype if n.op_type != "Cast" else y.dtype
            values[n.output[0]] = np.asarray(y, dtype=dtype)
    for j, vi in enumerate(graph.output):
        if vi.name in values:
            np.save(os.path.join(d, f"output_{j}.npy"), values[vi.name])


def per_model(d, unsupported_status):
    try:
        run_model(d)
    except Unsupported as e:
        print(e.line, file=sys.stderr)
        sys.exit(unsupported_status)


def persistent(unsupported_status):
    """One model directory per line on stdin, one answer line per model on stdout. Everything else
    this process prints goes to stderr: stdout carries the protocol only."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        d = line.rstrip("\n")
        if not d:
            continue
        try:
            run_model(d)
            answer = "0"
        except Unsupported as e:
            print(e.line, file=sys.stderr, flush=True)
            answer = f"{unsupported_status} {e.line}"
        except Exception as e:  # the engine's own error on this model: status 1, and on to the next
            traceback.print_exc(file=sys.stderr)
            answer = "1 " + " ".join(f"{type(e).__name__}: {e}".split())
        answers.write(answer + "\n")


def main(argv):
    opts = dict(a.split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
    status = int(opts.get("--unsupported-status", EXIT_UNSUPPORTED))
    if os.environ.get("QUORUM_EXEC_PROTOCOL") == "persistent":
        persistent(status)
    else:
        per_model(argv[-1], status)


if __name__ == "__main__":
    main(sys.argv)
