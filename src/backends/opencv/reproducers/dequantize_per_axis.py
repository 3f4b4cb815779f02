#!/usr/bin/python3
# known_differences.json note "Per-axis QuantizeLinear / DequantizeLinear" (refused in opencv_support.cpp).
# OpenCV 4.6's ONNX importer reads a per-axis DequantizeLinear (opset 13: 1-D x_scale / x_zero_point along
# `axis`) with its first scale and zero point for every index, without an error: DequantizeLinear(q, scale [0.5, 1,
# 2], zero point [0, 3, -2], axis 1) on q [1, 3, 2, 4] dequantizes channels 1 and 2 with channel 0's 0.5 and 0.
# (A per-axis QuantizeLinear is refused at import: 'Per-channel scales/zeropoints are not supported'.)
# Control: axis 0 of length 1 (one scale). Run: /usr/bin/python3 dequantize_per_axis.py (exit 1 while the bug is
# there). The input is a per-tensor QuantizeLinear's output under ONNX Runtime's quantizer naming ("<base>quantized",
# which 4.6's importer needs).
import sys

import cv2
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def run(shape, axis, scales, zero_points):
    inits = [numpy_helper.from_array(np.array(0.25, np.float32), "q/scale"),
             numpy_helper.from_array(np.array(0, np.int8), "q/zero_point"),
             numpy_helper.from_array(np.array(scales, np.float32), "d/scale"),
             numpy_helper.from_array(np.array(zero_points, np.int8), "d/zero_point")]
    q = helper.make_node("QuantizeLinear", ["x", "q/scale", "q/zero_point"], ["q/quantized"], name="q")
    d = helper.make_node("DequantizeLinear", ["q/quantized", "d/scale", "d/zero_point"], ["y"], name="d", axis=axis)
    g = helper.make_graph([q, d], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    x = (np.arange(np.prod(shape)).reshape(shape) - 12).astype(np.float32)
    net = cv2.dnn.readNetFromONNX(np.frombuffer(m.SerializeToString(), np.uint8))
    net.setInput(x)
    got = net.forward()
    quantized = np.clip(np.round(x / 0.25), -128, 127)
    along = [-1 if k == axis % len(shape) else 1 for k in range(len(shape))]
    want = (quantized - np.array(zero_points).reshape(along)) * np.array(scales).reshape(along)
    err = float(np.abs(got - want).max())
    print(f"DequantizeLinear axis={axis} scales={scales} zero points={zero_points} on {shape}: max abs error {err}")
    return err == 0


control = run([1, 3, 2, 4], 0, [0.5], [1])
bug = run([1, 3, 2, 4], 1, [0.5, 1.0, 2.0], [0, 3, -2])
print("control", "right" if control else "WRONG", "| per axis", "right" if bug else "WRONG")
sys.exit(0 if control and bug else 1)
