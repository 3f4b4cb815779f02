#!/usr/bin/python3
# Ledger entry opencv-conv-kernel-shape-required (src/backends/opencv/known_differences.json).
# OpenCV 4.6's ONNX importer refuses a Conv without kernel_shape, which ONNX makes optional ("If not
# present, should be inferred from input W"): 'kernel_size (or kernel_h and kernel_w) not specified'
# in getKernelSize (layers_common.cpp:106). Control: the same Conv with kernel_shape=[3,3] written.
# Run: /usr/bin/python3 conv_no_kernel_shape.py (Debian python3-opencv, python3-onnx, python3-numpy).
# Exit status 1 while the bug is there.
import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

K = (((np.arange(54) % 7) - 3) / 4).astype(np.float32).reshape(3, 2, 3, 3)


def conv(attrs):
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 5, 5])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3, 3, 3])
    g = helper.make_graph([helper.make_node("Conv", ["X", "K"], ["Y"], name="y", **attrs)], "g", [x], [y],
                          [numpy_helper.from_array(K, "K")])
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
x = (((np.arange(50) % 5) - 2) / 2).astype(np.float32).reshape(1, 2, 5, 5)
want = np.zeros((1, 3, 3, 3), np.float32)
for o in range(3):
    for i in range(3):
        for j in range(3):
            want[0, o, i, j] = (x[0, :, i:i + 3, j:j + 3] * K[o]).sum()
print("expected Y[0,0] =", want[0, 0].ravel().tolist())
bad = 0
for what, attrs in (("kernel_shape=[3,3] (control)", {"kernel_shape": [3, 3]}), ("kernel_shape left out", {})):
    try:
        got = run(conv(attrs), x)
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)
        print(f"{what}: {'right' if ok else 'WRONG'} Y[0,0] = {got[0, 0].ravel().tolist()}")
    except cv2.error as e:
        ok = False
        msg = [line for line in str(e).splitlines() if "error:" in line][-1]
        print(f"{what}: OpenCV failed at import: {msg.strip()[:160]}")
    bad += 0 if ok else 1
print("bug reproduces" if bad else "bug fixed: both forms right")
raise SystemExit(1 if bad else 0)
