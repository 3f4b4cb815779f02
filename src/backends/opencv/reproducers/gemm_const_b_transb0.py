#!/usr/bin/python3
# Ledger entry opencv-gemm-const-b-transb0 (src/backends/opencv/known_differences.json).
# OpenCV 4.6's ONNX importer (parseGemm) mishandles Gemm(X, B) with a constant B and transB=0:
#  - transB left out (ONNX's default, 0): B is read as if transB=1, so a square B gives X @ B^T
#    (silently wrong) and a non-square B fails at forward (fully_connected_layer.cpp:181);
#  - transB=0 written: a square B is right, a non-square B fails at forward the same way.
# Control: the same product as Gemm(X, B^T, transB=1) is right. Run: /usr/bin/python3 gemm_const_b_transb0.py
# (Debian python3-opencv, python3-onnx, python3-numpy). Exit status 1 while the bug is there.
import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gemm(b, attrs):
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    n = b.shape[0] if attrs.get("transB", 0) else b.shape[1]
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, n])
    node = helper.make_node("Gemm", ["X", "B"], ["Y"], name="y", **attrs)
    g = helper.make_graph([node], "g", [x], [y], [numpy_helper.from_array(b, "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString()


def run(buf, x):
    net = cv2.dnn.readNetFromONNX(np.frombuffer(buf, np.uint8))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    net.setInput(x, "X")
    return net.forward()


print("OpenCV", cv2.__version__)
x = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
bad = 0
for cols in (3, 4):
    b = (np.arange(3 * cols, dtype=np.float32).reshape(3, cols) - 5) / 3
    want = x @ b
    print(f"B [3,{cols}]: expected X @ B = {[round(float(v), 4) for v in want.ravel()]}")
    cases = [("Gemm(X, B^T, transB=1) (control)", np.ascontiguousarray(b.T), {"transB": 1}, True),
             ("Gemm(X, B), transB left out", b, {}, False), ("Gemm(X, B), transB=0 written", b, {"transB": 0}, False)]
    for what, w, attrs, control in cases:
        try:
            got = run(gemm(w, attrs), x)
            ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)
            print(f"  {what}: {'right' if ok else 'WRONG'} {[round(float(v), 4) for v in got.ravel()]}")
        except cv2.error as e:
            ok = False
            msg = [line for line in str(e).splitlines() if "error:" in line][-1]
            print(f"  {what}: OpenCV failed: {msg[:150]}")
        bad += 0 if ok else 1
        if control and not ok:
            print("  the control fails: this is not the bug the entry describes")
print("bug reproduces" if bad else "bug fixed: every form right")
raise SystemExit(1 if bad else 0)
