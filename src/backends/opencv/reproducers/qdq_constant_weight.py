#!/usr/bin/python3
# known_differences.json entry opencv-qdq-constant-weight-dequantize (avoided in opencv::onnx_form).
# OpenCV 4.6's ONNX importer fails on DequantizeLinear of a constant (an initializer): the QDQ format's
# quantized weight, DequantizeLinear(W_int8) -> MatMul/Conv -> QuantizeLinear. A node whose inputs are all
# constants is run at import time, with its scale and zero point as further inputs of the Dequantize layer:
# 'inputs.size() == 1' in quantization_utils.cpp:103 (getMemoryShapes). Named "...quantized" (ONNX
# Runtime's quantizer's naming) it fails earlier: handleQuantizedNode looks up "<input minus 9 chars>scale"
# ('Blob ... not found in const blobs').
# Control: the same QDQ model with the weight computed (a graph input quantized by QuantizeLinear) runs right.
# Run: /usr/bin/python3 qdq_constant_weight.py (exit 1 while the bug is there).
import cv2
import numpy as np
from onnx import TensorProto, helper, numpy_helper

XS, XZ, WS, WZ, YS, YZ = 0.0625, 3, 0.03125, -2, 0.125, 1
W = np.array([[-53, -50], [63, 83], [-35, 29]], np.int8)  # [K=3, units=2]
X = np.array([[1.0, -0.5, 2.0], [0.25, 0.75, -1.5]], np.float32)


def q(v, s, z):
    return np.clip(np.round(v / s) + z, -128, 127).astype(np.int8)


def run(weight_constant, w_name):
    c = lambda v, n, t: numpy_helper.from_array(np.array(v, t), n)  # noqa: E731
    inits = [c(XS, "q/scale", np.float32), c(XZ, "q/zero_point", np.int8),
             c(XS, "mm/x_scale", np.float32), c(XZ, "mm/x_zero_point", np.int8),
             c(WS, "mm/w_scale", np.float32), c(WZ, "mm/w_zero_point", np.int8),
             c(YS, "mm/y_scale", np.float32), c(YZ, "mm/y_zero_point", np.int8)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "q/scale", "q/zero_point"], ["q/quantized"], name="q")]
    if weight_constant:
        inits.append(numpy_helper.from_array(W, "w"))
        wq = "w"
    else:  # the control: the weight's float values, a graph input, quantized in the graph
        inputs.append(helper.make_tensor_value_info("wf", TensorProto.FLOAT, [3, 2]))
        inits += [c(WS, "wq/scale", np.float32), c(WZ, "wq/zero_point", np.int8)]
        nodes.append(helper.make_node("QuantizeLinear", ["wf", "wq/scale", "wq/zero_point"], ["wq/quantized"],
                                      name="wq"))
        wq = "wq/quantized"
    nodes += [helper.make_node("DequantizeLinear", ["q/quantized", "mm/x_scale", "mm/x_zero_point"], ["mm/x_deq"],
                               name="dx"),
              helper.make_node("DequantizeLinear", [wq, "mm/w_scale", "mm/w_zero_point"], [w_name], name="dw"),
              helper.make_node("MatMul", ["mm/x_deq", w_name], ["mm/float"], name="f"),
              helper.make_node("QuantizeLinear", ["mm/float", "mm/y_scale", "mm/y_zero_point"], ["mm/y_quantized"],
                               name="mm")]
    y = helper.make_tensor_value_info("mm/y_quantized", TensorProto.INT8, [2, 2])
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, [y], inits), opset_imports=[helper.make_opsetid("", 13)])
    want = q(((q(X, XS, XZ).astype(np.float32) - XZ) * XS) @ ((W.astype(np.float32) - WZ) * WS), YS, YZ)
    what = f"QDQ MatMul, weight {'an initializer' if weight_constant else 'computed'}, named {w_name}"
    try:
        net = cv2.dnn.readNetFromONNX(np.frombuffer(m.SerializeToString(), np.uint8))
        net.setInput(X, "x")
        if not weight_constant:
            net.setInput(((W.astype(np.float32) - WZ) * WS), "wf")
        got = net.forward("onnx_node!mm")
        ok = got.dtype == np.int8 and np.array_equal(got.reshape(want.shape), want)
        print(f"{what}: {got.ravel().tolist()}, want {want.ravel().tolist()}: {'right' if ok else 'WRONG'}")
    except cv2.error as e:
        ok = False
        print(f"{what}: OpenCV failed: {[l for l in str(e).splitlines() if 'error:' in l][-1]}")
    return ok


print("OpenCV", cv2.__version__)
control = run(False, "mm/w_deq")
bad = not run(True, "mm/w_deq")
bad += not run(True, "mm/w_dequantized")
print("control right" if control else "the control fails: not the bug described")
print("bug reproduces" if bad else "bug fixed")
raise SystemExit(1 if bad else 0)
