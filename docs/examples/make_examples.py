#!/usr/bin/env python3
"""Writes the example models of docs/examples/ (LeNet-5 and a small residual network).

Weights are He-scaled normal draws from a fixed seed, rounded to 4 decimals so the files stay
readable. Run from the repository root: python3 docs/examples/make_examples.py
"""
import json
import math
import random

rng = random.Random(20261121)


def weights(shape, fan_in, kind="normal"):
    n = math.prod(shape)
    if kind == "zeros":
        data = [round(rng.uniform(-0.05, 0.05), 4) for _ in range(n)]
    elif kind == "ones":
        data = [round(rng.uniform(0.9, 1.1), 4) for _ in range(n)]
    elif kind == "positive":
        data = [round(rng.uniform(0.5, 1.5), 4) for _ in range(n)]
    else:
        std = math.sqrt(2.0 / fan_in)
        data = [round(rng.gauss(0.0, std), 4) for _ in range(n)]
    return {"dtype": "float32", "shape": list(shape), "data": data}


class Model:
    def __init__(self, name, inputs):
        self.m = {"format": "quorum.model", "version": 1, "name": name,
                  "inputs": inputs, "outputs": [], "initializers": [], "nodes": []}

    def init(self, name, shape, fan_in, kind="normal"):
        w = weights(shape, fan_in, kind)
        w["name"] = name
        self.m["initializers"].append(w)
        return name

    def node(self, name, op, inputs, **attrs):
        self.m["nodes"].append({"name": name, "op": op, "inputs": inputs, "outputs": [name], "attrs": attrs})
        return name

    def conv(self, name, x, cin, cout, k, **attrs):
        w = self.init(name + ".weight", [cout, cin, k, k], cin * k * k)
        b = self.init(name + ".bias", [cout], 1, "zeros")
        return self.node(name, "conv2d", [x, w, b], out_channels=cout, kernel_shape=[k, k], **attrs)

    def dense(self, name, x, fin, units):
        w = self.init(name + ".weight", [units, fin], fin)
        b = self.init(name + ".bias", [units], 1, "zeros")
        return self.node(name, "dense", [x, w, b], units=units)

    def bn(self, name, x, c):
        ps = [self.init(name + "." + p, [c], 1, kind)
              for p, kind in (("scale", "ones"), ("bias", "zeros"), ("mean", "zeros"), ("var", "positive"))]
        return self.node(name, "batch_norm", [x] + ps, epsilon=1e-5)

    def save(self, path, output):
        self.m["outputs"] = [output]
        # Weight arrays on one line each, everything else indented (as quorum writes models).
        datas = []
        for w in self.m["initializers"]:
            datas.append(w["data"])
            w["data"] = "@@DATA%d@@" % (len(datas) - 1)
        text = json.dumps(self.m, indent=1)
        for i, d in enumerate(datas):
            text = text.replace('"@@DATA%d@@"' % i, json.dumps(d, separators=(",", ":")))
        with open(path, "w") as f:
            f.write(text + "\n")


def lenet5():
    m = Model("lenet5", [{"name": "image", "dtype": "float32", "shape": [1, 1, 28, 28]}])
    x = m.conv("conv1", "image", 1, 6, 5, pads=[2, 2, 2, 2])
    x = m.node("relu1", "relu", [x])
    x = m.node("pool1", "max_pool2d", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = m.conv("conv2", x, 6, 16, 5)
    x = m.node("relu2", "relu", [x])
    x = m.node("pool2", "max_pool2d", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = m.node("flatten", "flatten", [x], axis=1)
    x = m.dense("fc1", x, 400, 120)
    x = m.node("relu3", "relu", [x])
    x = m.dense("fc2", x, 120, 84)
    x = m.node("relu4", "relu", [x])
    x = m.dense("fc3", x, 84, 10)
    x = m.node("softmax", "softmax", [x], axis=-1)
    m.save("docs/examples/lenet5.json", x)


def residual():
    m = Model("residual_small", [{"name": "image", "dtype": "float32", "shape": [1, 3, 16, 16]}])
    x = m.conv("stem", "image", 3, 8, 3, auto_pad="SAME_UPPER")
    x = m.node("stem_relu", "relu", [x])
    y = m.conv("block_conv1", x, 8, 8, 3, pads=[1, 1, 1, 1])
    y = m.bn("block_bn1", y, 8)
    y = m.node("block_relu1", "relu", [y])
    y = m.conv("block_conv2", y, 8, 8, 3, pads=[1, 1, 1, 1])
    y = m.bn("block_bn2", y, 8)
    s = m.node("block_add", "add", [x, y])
    s = m.node("block_relu2", "relu", [s])
    g = m.node("gap", "global_avg_pool", [s])
    f = m.node("flatten", "flatten", [g], axis=1)
    o = m.dense("fc", f, 8, 10)
    m.save("docs/examples/residual_small.json", o)


lenet5()
residual()
