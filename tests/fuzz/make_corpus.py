#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz: tiny ONNX models (with the onnx package), .npy files
(numpy) and pictures (PNG and BMP written by hand, so that no imaging package is needed), each
picture behind the 4-byte header image_tensor_fuzz.cpp reads. Run from anywhere:

    /usr/bin/python3 tests/fuzz/make_corpus.py

The pipeline files in corpus/pipeline_config/ are written by hand (two copied from configs/), and
the three jpeg_* pictures were written once with OpenCV's cv::imencode (no Python binding of
OpenCV here); this script leaves them alone. The output is deterministic, so a rerun changes nothing in git.
"""
import io
import os
import struct
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def save_model(name, nodes, inputs, outputs, initializers=(), opset=13, check=True):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="redwood-fuzz")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    with open(os.path.join(CORPUS, "onnx_import", name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


def f32(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def i64(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.int64), name)


def onnx_seeds():
    os.makedirs(os.path.join(CORPUS, "onnx_import"), exist_ok=True)
    rng = np.random.default_rng(7)
    vi = helper.make_tensor_value_info
    # A text detector's shape: NCHW picture in, one probability map of the same extents out
    # (the pipeline target's det.onnx).
    save_model("text_det", [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["prob"]),
    ], [vi("x", TensorProto.FLOAT, ["n", 3, "h", "w"])], [vi("prob", TensorProto.FLOAT, ["n", 1, "h", "w"])], [
        f32("w", rng.normal(size=(4, 3, 3, 3)) * 0.1), f32("b", np.zeros(4)), f32("s", np.ones(4)),
        f32("bb", np.zeros(4)), f32("m", np.zeros(4)), f32("v", np.ones(4)), f32("w2", rng.normal(size=(1, 4, 1, 1))),
    ])
    # A text recognizer's shape: [N, 3, 48, W] crops in, [N, W/4, classes] CTC scores out.
    save_model("text_rec", [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[48, 4], strides=[48, 4]),
        helper.make_node("Squeeze", ["c", "axes"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Softmax", ["t"], ["prob"], axis=2),
    ], [vi("x", TensorProto.FLOAT, ["n", 3, 48, "w"])], [vi("prob", TensorProto.FLOAT, ["n", "t", 6])], [
        f32("w", rng.normal(size=(6, 3, 48, 4)) * 0.05), i64("axes", [2]),
    ])
    # Shape arithmetic that constant folding and per-shape folding evaluate at load.
    save_model("shape_chain", [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("ConstantOfShape", ["cshape"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
        helper.make_node("MatMul", ["flat", "ones"], ["y"]),
    ], [vi("x", TensorProto.FLOAT, ["n", 2, 3])], [vi("y", TensorProto.FLOAT, ["n", 1])], [
        i64("zero", 0), i64("axes", [0]), i64("minus_one", [-1]), i64("cshape", [6, 1]),
    ])
    # Constants folded at load: Constant nodes, Range, Cast, Add of initializers, Slice, Pad, Resize.
    save_model("constant_fold", [
        helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])),
        helper.make_node("Add", ["c", "bias"], ["cb"]),
        helper.make_node("Cast", ["cb"], ["ci"], to=TensorProto.INT64),
        helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Slice", ["cf", "starts", "ends"], ["sl"]),
        helper.make_node("Pad", ["sl", "pads"], ["pd"]),
        helper.make_node("Resize", ["pd", "", "scales"], ["rs"], mode="nearest"),
        helper.make_node("Mul", ["x", "rs"], ["y"]),
    ], [vi("x", TensorProto.FLOAT, [1, 1, 4, 4])], [vi("y", TensorProto.FLOAT, [1, 1, 4, 4])], [
        f32("bias", [[0.5, 0.5], [0.5, 0.5]]), i64("starts", [0, 0]), i64("ends", [1, 2]),
        i64("pads", [0, 0, 1, 0]), f32("scales", [2, 2]),
    ])
    # Gemm with fused activation, pooling and Split: the epilogue and region passes.
    save_model("pool_gemm", [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w", "b"], ["y0"], transB=1),
        helper.make_node("HardSigmoid", ["y0"], ["hs"], alpha=1 / 6, beta=0.5),
        helper.make_node("Mul", ["y0", "hs"], ["y1"]),
        helper.make_node("Split", ["y1", "split"], ["ya", "yb"], axis=1),
    ], [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [vi("ya", TensorProto.FLOAT, [1, 2]), vi("yb", TensorProto.FLOAT, [1, 2])], [
        f32("w", rng.normal(size=(4, 3))), f32("b", np.zeros(4)), i64("split", [2, 2]),
    ])
    # What the importer rewrites before the IR: nodes out of topological order (sorted, in a
    # branch too) and Ifs whose conditions are constants (an initializer, Constant nodes, one If
    # nested in a branch), inlined. ONNX's checker refuses the order, so it is not run here.
    def branch(name, nodes, out, initializers=()):
        return helper.make_graph(nodes, name, [], [vi(out, TensorProto.FLOAT, [2])], initializer=list(initializers))
    nested = helper.make_node("If", ["inner"], ["e"], then_branch=branch("inner_then", [
        helper.make_node("Add", ["picked", "k2"], ["e1"]), helper.make_node("Abs", ["e1"], ["e2"])], "e2",
        [f32("k2", [1, 1])]), else_branch=branch("inner_else", [helper.make_node("Neg", ["picked"], ["e3"])], "e3"))
    save_model("control_flow", [
        helper.make_node("If", ["cond"], ["picked"], then_branch=branch("then", [
            helper.make_node("Neg", ["t1"], ["t"]), helper.make_node("Mul", ["h", "k"], ["t1"])], "t", [f32("k", [2, 3])]),
            else_branch=branch("else", [helper.make_node("Abs", ["h"], ["a"])], "a")),
        helper.make_node("Constant", [], ["flag"], value=helper.make_tensor("flag", TensorProto.BOOL, [], [False])),
        helper.make_node("If", ["flag"], ["y"], then_branch=branch("then2", [
            helper.make_node("Identity", ["picked"], ["i"])], "i"), else_branch=branch("else2", [
            helper.make_node("Constant", [], ["inner"], value=helper.make_tensor("inner", TensorProto.BOOL, [], [True])),
            nested], "e")),
        helper.make_node("Relu", ["x"], ["h"]),
    ], [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])], [
        numpy_helper.from_array(np.array(True), "cond"),
    ], check=False)


def npy_seeds():
    out = os.path.join(CORPUS, "npy")
    os.makedirs(out, exist_ok=True)
    arrays = {
        "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f16_4": np.linspace(-1, 1, 4).astype(np.float16),
        "i64_scalar": np.array(42, dtype=np.int64),
        "i32_2x1x2": np.array([[[1, -2]], [[3, -4]]], dtype=np.int32),
        "u8_picture": np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3),
        "bool_3": np.array([True, False, True]),
        "f32_empty": np.zeros((0, 3), dtype=np.float32),
    }
    for name, array in arrays.items():
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            f.write(buf.getvalue())
    # Format 2.0 (a 4-byte header length), which numpy writes for headers over 64 KiB.
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ones((2, 2), dtype=np.float32), version=(2, 0))
    with open(os.path.join(out, "f32_v2.npy"), "wb") as f:
        f.write(buf.getvalue())


def png(width, height, pixels, color_type):
    """pixels: rows of bytes (no filter byte); color_type 2 (RGB) or 0 (grey)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + row for row in pixels)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def bmp(width, height, pixel):
    rows = []
    for y in range(height - 1, -1, -1):  # bottom-up
        row = b"".join(bytes(pixel(x, y)) for x in range(width))
        row += b"\x00" * ((4 - len(row) % 4) % 4)
        rows.append(row)
    data = b"".join(rows)
    header = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    return header + info + data


def image_seeds():
    out = os.path.join(CORPUS, "image_tensor")
    os.makedirs(out, exist_ok=True)
    # The 4-byte header image_tensor_fuzz.cpp reads: flags, height code, width code, batch/size code.
    def write(name, header, body):
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(header) + body)
    rgb = [b"".join(bytes((x * 40 % 256, y * 60 % 256, (x + y) * 20 % 256)) for x in range(6)) for y in range(4)]
    grey = [bytes((x * 30 + y) % 256 for x in range(5)) for y in range(5)]
    write("png_rgb_nchw_fixed", [0x01, 8, 8, 0], png(6, 4, rgb, 2))
    write("png_rgb_nhwc_letterbox", [0x0a, 5, 7, 0], png(6, 4, rgb, 2))
    write("png_grey_dynamic", [0x15, 0, 0, 0], png(5, 5, grey, 0))
    write("png_rgb_dynamic_size", [0x04, 0, 0, 0x04], png(6, 4, rgb, 2))
    write("bmp_bgr_auto", [0x00, 3, 9, 0], bmp(7, 3, lambda x, y: (x * 30 % 256, y * 80 % 256, 128)))
    write("bmp_grey_letterbox", [0x19, 6, 2, 1], bmp(4, 4, lambda x, y: (x * 60 % 256, 0, y * 60 % 256)))
    # A 1x1 PPM (OpenCV reads the netpbm formats too).
    write("ppm_1x1", [0x01, 2, 2, 0], b"P6\n1 1\n255\n\x10\x20\x30")


if __name__ == "__main__":
    onnx_seeds()
    npy_seeds()
    image_seeds()
