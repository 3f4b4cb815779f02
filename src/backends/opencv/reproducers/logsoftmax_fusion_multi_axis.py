#!/usr/bin/python3
# known_differences.json entry opencv-logsoftmax-fusion-refuses-multi-axis-reducemax.
# OpenCV 4.6's ONNX importer refuses a valid model whose nodes have the shape of its softmax / log-softmax
# subgraph fusion (s = x - ReduceMax(x), then Log(s), then Sub(s, log)) when the ReduceMax reduces more than one
# axis: the graph simplifier's match() raises "Unexpected number of axes: 2" instead of declining the fusion.
# Control: the same model with the ReduceMax over one axis loads and runs. Run: /usr/bin/python3
# logsoftmax_fusion_multi_axis.py (exit 1 while the bug is there). The file is checked by onnx.checker.
import sys

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper


def model(axes):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 1])
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=axes, keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["s"]),
             helper.make_node("Log", ["s"], ["l"]),
             helper.make_node("Sub", ["s", "l"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


x = np.array([[[3.0], [1.0]], [[0.5], [2.0]]], np.float32)
failed = False
for axes in ([1], [1, 2]):
    try:
        net = cv2.dnn.readNetFromONNX(np.frombuffer(model(axes), np.uint8))
        net.setInput(x)
        net.forward()
        print(f"ReduceMax axes {axes}: loads and runs")
    except cv2.error as e:
        print(f"ReduceMax axes {axes}: refused: {str(e).strip().splitlines()[-1]}")
        failed = True
print("cv2", cv2.__version__)
sys.exit(1 if failed else 0)
