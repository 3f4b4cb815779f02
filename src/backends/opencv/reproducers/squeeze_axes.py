#!/usr/bin/python3
# known_differences.json note "Squeeze at opsets 11 and 12" (refused in opencv_support.cpp).
# OpenCV 4.6's ONNX importer (parseSqueeze, opset <= 12: axes is an attribute):
#  - Squeeze without axes (ONNX: every axis of length 1) fails at import ('layerParams.has("axes")');
#  - a negative axis is skipped: Squeeze(axes=[-4]) on [1,2,4,3] returns [1,2,4,3], want [2,4,3], and a
#    following layer fails on the shape (seed-2341 campaign: Min, Max and Concat after such a Squeeze).
# Control: the same Squeeze with axes=[0]. Run: /usr/bin/python3 squeeze_axes.py (exit 1 while the bugs are there).
import cv2
import numpy as np
from onnx import TensorProto, helper


def run(shape, axes, want_shape):
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(want_shape))
    node = helper.make_node("Squeeze", ["X"], ["Y"], name="y", **({} if axes is None else {"axes": axes}))
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 11)])
    xv = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    try:
        net = cv2.dnn.readNetFromONNX(np.frombuffer(m.SerializeToString(), np.uint8))
        net.setInput(xv, "X")
        got = net.forward().shape
        ok = tuple(got) == tuple(want_shape)
        print(f"Squeeze axes={axes} on {shape}: shape {list(got)}, want {list(want_shape)}: {'right' if ok else 'WRONG'}")
    except cv2.error as e:
        ok = False
        print(f"Squeeze axes={axes} on {shape}: OpenCV failed: {[l for l in str(e).splitlines() if 'error:' in l][-1]}")
    return ok


print("OpenCV", cv2.__version__)
control = run([1, 2, 4, 3], [0], (2, 4, 3))
bad = not run([1, 1, 4, 3], None, (4, 3))
bad += not run([1, 2, 4, 3], [-4], (2, 4, 3))
print("control right" if control else "the control fails: not the bugs described")
print("bugs reproduce" if bad else "bugs fixed")
raise SystemExit(1 if bad else 0)
