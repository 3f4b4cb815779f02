"""A small runner for Quorum's exec backend tests: evaluates a few ONNX operators with NumPy, and
misbehaves on request so the tests can check every outcome.

usage: /usr/bin/python3 numpy_runner.py [fault=MODE[:OpType]] [pidfile=PATH] [unsupported=4] [refuse=OpType] DIR
       (persistent mode, QUORUM_EXEC_PROTOCOL=persistent: the same options without DIR; one DIR per
       line on stdin, one answer line "STATUS [MESSAGE]" per model on stdout)

DIR holds model.onnx and input_<i>.npy; the runner writes output_<j>.npy (docs/exec-backend.md).
Without a fault it evaluates Relu, Sigmoid, Tanh, Abs, Neg, Exp, Add, Sub, Mul, Div, MatMul, Gemm,
Transpose and Reshape and exits 3 on any other operator. fault=MODE misbehaves instead, on every model or,
with :OpType, only on models holding that operator:
  crash    SIGSEGV          exit1    an uncaught Python exception (exit status 1)
  hang     sleep forever, after forking a grandchild that sleeps too (both pids go to pidfile=PATH)
  exit3    refuse the model (exit status 3)
  garbage  output_0.npy is not a .npy file      shape   output_0.npy has the wrong shape
  dtype    output_0.npy is float64              missing no output file at all
skew=OpType computes that operator's outputs 1.5 times too large (wrong numbers, exit status 0).
noop=OpType returns that operator's first input unchanged (a wrong shape for a Transpose): a later
node then fails with NumPy's own error (exit status 1), which names no node of the model.
name_errors=1 reports an operator's failure the way ONNX Runtime does, naming the node ("Non-zero status
code returned while running OpType node. Name:'NAME' Status Message: ...").
unsupported=4 declares any operator it does not evaluate unsupported the documented way (exit status
4, "unsupported: OpType" on stderr) instead of exit status 3; refuse=OpType declares that one too,
and claim=OpType names that operator in the refusal instead of the one refused.
"""
import os
import signal
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper


def gemm(x, a):
    a_, b_, c = x[0], x[1], x[2] if len(x) > 2 else 0
    if a.get("transA", 0):
        a_ = a_.T
    if a.get("transB", 0):
        b_ = b_.T
    return a.get("alpha", 1.0) * (a_ @ b_) + a.get("beta", 1.0) * c


OPS = {
    "Relu": lambda x, a: np.maximum(x[0], 0),
    "Sigmoid": lambda x, a: 1 / (1 + np.exp(-x[0])),
    "Tanh": lambda x, a: np.tanh(x[0]),
    "Abs": lambda x, a: np.abs(x[0]),
    "Neg": lambda x, a: -x[0],
    "Exp": lambda x, a: np.exp(x[0]),
    "Add": lambda x, a: x[0] + x[1],
    "Sub": lambda x, a: x[0] - x[1],
    "Mul": lambda x, a: x[0] * x[1],
    "Div": lambda x, a: x[0] / x[1],
    "MatMul": lambda x, a: x[0] @ x[1],
    "Gemm": gemm,
    "Transpose": lambda x, a: np.transpose(x[0], a.get("perm")),
    # A 0 in the target shape copies the input's size there (allowzero 0).
    "Reshape": lambda x, a: np.reshape(x[0], [int(x[0].shape[i]) if int(v) == 0 else int(v) for i, v in enumerate(x[1])]),
}


def output_shape(value_info):
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


def misbehave(fault, d, graph, opts):
    out0 = os.path.join(d, "output_0.npy")
    if fault == "crash":
        print("numpy runner: crashing on purpose", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "hang":
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(3600)
            os._exit(0)
        if "pidfile" in opts:
            with open(opts["pidfile"], "w") as f:
                f.write(f"{os.getpid()} {grandchild}\n")
        print("numpy runner: hanging on purpose", flush=True)
        time.sleep(3600)
    elif fault == "exit1":
        raise RuntimeError("numpy runner: failing on purpose")
    elif fault == "exit3":
        print("numpy runner: refusing the model on purpose")
        sys.exit(3)
    elif fault == "garbage":
        with open(out0, "wb") as f:
            f.write(b"this is not a .npy file")
    elif fault == "shape":
        np.save(out0, np.zeros([7], dtype=np.float32))
    elif fault == "dtype":
        np.save(out0, np.zeros(output_shape(graph.output[0]), dtype=np.float64))
    elif fault != "missing":
        print(f"numpy runner: unknown fault {fault}", file=sys.stderr)
        sys.exit(2)
    sys.exit(0)


class Refused(Exception):
    """An operator declared unsupported (exit status 4, "unsupported: OpType")."""


def run(d, opts):
    graph = onnx.load(os.path.join(d, "model.onnx")).graph
    fault, _, on_op = opts.get("fault", "").partition(":")
    if fault and (not on_op or any(n.op_type == on_op for n in graph.node)):
        misbehave(fault, d, graph, opts)
    values = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for i, vi in enumerate(graph.input):
        values[vi.name] = np.load(os.path.join(d, f"input_{i}.npy"))
    for n in graph.node:
        if n.op_type not in OPS or n.op_type == opts.get("refuse"):
            if opts.get("unsupported") == "4":
                raise Refused(opts.get("claim", n.op_type))
            print(f"numpy runner: no operator {n.op_type}", file=sys.stderr)
            sys.exit(3)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        inputs = [values[i] for i in n.input]
        if opts.get("noop") == n.op_type:
            values[n.output[0]] = inputs[0]
        elif opts.get("name_errors") == "1":
            try:
                values[n.output[0]] = np.asarray(OPS[n.op_type](inputs, attrs), dtype=inputs[0].dtype)
            except Exception as e:
                raise RuntimeError(f"Non-zero status code returned while running {n.op_type} node. "
                                   f"Name:'{n.name}' Status Message: {e}") from e
        else:
            values[n.output[0]] = np.asarray(OPS[n.op_type](inputs, attrs), dtype=inputs[0].dtype)
        if opts.get("skew") == n.op_type:
            values[n.output[0]] = values[n.output[0]] * np.asarray(1.5, dtype=inputs[0].dtype)
    for j, vi in enumerate(graph.output):
        np.save(os.path.join(d, f"output_{j}.npy"), values[vi.name])


def persistent(opts):
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        d = line.rstrip("\n")
        try:
            run(d, opts)
            answers.write("0\n")
        except Refused as e:
            answers.write(f"4 unsupported: {e}\n")
        except SystemExit as e:
            answers.write(f"{e.code if isinstance(e.code, int) else 1}\n")
        except Exception as e:
            answers.write(f"1 {type(e).__name__}: {e}\n")


def main(argv):
    if os.environ.get("QUORUM_EXEC_PROTOCOL") == "persistent":
        persistent(dict(a.split("=", 1) for a in argv[1:]))
        return
    try:
        run(argv[-1], dict(a.split("=", 1) for a in argv[1:-1]))
    except Refused as e:
        print(f"unsupported: {e}", file=sys.stderr)
        sys.exit(4)


if __name__ == "__main__":
    main(sys.argv)
