"""Quorum exec-backend runner: runs a model with OpenCV DNN through python3-opencv.

usage: quorum fuzz --backends exec:/usr/bin/python3+examples/exec/opencv_dnn.py ...
       (Quorum runs: /usr/bin/python3 examples/exec/opencv_dnn.py DIR)

DIR holds model.onnx and input_<i>.npy (the i-th ONNX graph input); this writes output_<j>.npy for
the j-th ONNX graph output. Exit status 3 tells Quorum that OpenCV could not load the model (a
conversion failure); a Python exception (status 1) is a library error. docs/exec-backend.md has
the whole protocol.

OpenCV quirks handled here: layers are named after ONNX *nodes* ("onnx_node!<node name>", or
"onnx_node_output_0!<tensor>" for an unnamed node), not after tensors, so each output is fetched
from the layer of the node producing it; forward() without names returns the last layer rather than
graph output 0; and blobs keep OpenCV's own shapes (a scalar is [1]), so each one is reshaped to the
ONNX output's shape when the element counts agree.
"""
import os
import re
import sys

import cv2
import numpy as np
import onnx


def importer_reason(error):
    """OpenCV's importer error without node names and source locations, so one cause reads the same
    for every model: "Clip@ai.onnx: (expected: 'node_proto.input_size() == 1'), where ..."."""
    text = " ".join(line.lstrip("> ").strip() for line in str(error).splitlines())
    node = re.search(r"Node \[([^\]]+)\]", text)
    inner = text.rsplit(" error: ", 1)[-1]  # the innermost of OpenCV's nested errors
    inner = re.sub(r"\(-?\d+:[^)]*\)|in function '[^']*'", "", inner)
    return (node.group(1) + ": " if node else "") + " ".join(inner.split())


def main():
    d = sys.argv[-1]
    path = os.path.join(d, "model.onnx")
    graph = onnx.load(path).graph  # names, shapes and types of the graph inputs and outputs
    for vi in list(graph.input) + list(graph.output):
        if vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            print(f"OpenCV DNN computes float32 only ('{vi.name}' is not float32)", file=sys.stderr)
            sys.exit(3)

    cv2.setNumThreads(int(os.environ.get("QUORUM_THREADS", "1")))
    try:
        net = cv2.dnn.readNetFromONNX(path)
    except cv2.error as e:
        print("OpenCV's ONNX importer refused the model: " + importer_reason(e), file=sys.stderr)
        sys.exit(3)
    if net.empty():
        print("OpenCV's ONNX importer returned an empty network", file=sys.stderr)
        sys.exit(3)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)

    for i, vi in enumerate(graph.input):
        net.setInput(np.load(os.path.join(d, f"input_{i}.npy")), vi.name)

    # The layer holding each graph output, by the name of the node producing it. Quorum's exporter
    # makes each Quorum value the first output of its own node; a value OpenCV has no layer for is
    # skipped (if it is a real output, Quorum reports the missing file).
    layer_of = {}
    for n in graph.node:
        layer_of[n.output[0]] = "onnx_node!" + n.name if n.name else "onnx_node_output_0!" + n.output[0]
    wanted = [(j, vi) for j, vi in enumerate(graph.output) if vi.name in layer_of]
    blobs = net.forward([layer_of[vi.name] for _, vi in wanted])

    for (j, vi), blob in zip(wanted, blobs):
        shape = [dim.dim_value for dim in vi.type.tensor_type.shape.dim]
        if blob.size == int(np.prod(shape)):
            blob = blob.reshape(shape)
        # Otherwise the blob is written as OpenCV shaped it, and Quorum reports the mismatch.
        np.save(os.path.join(d, f"output_{j}.npy"), np.ascontiguousarray(blob, dtype=np.float32))


if __name__ == "__main__":
    main()
