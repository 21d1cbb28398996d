#!/usr/bin/env python3
"""Does a model survive fp16 at all? PyTorch's own answer, for the models bench_gpu.py exports.

Redwood's `redwood_gpu_bench --check` compares its fp16 output with the fp32 reference executor.
For torchvision's MobileNetV3-Large built with weights=None that error is 1.0 (docs/cuda.md,
"Known limits"): a wrong fp16 kernel would give that, and so would a randomly initialized network
whose activations fall below fp16's range, so that any fp16 run gives about zero. This script
runs the same model (same constructor, same seed as bench_gpu.export) in PyTorch at fp32 and at
fp16 on the GPU and prints, per model:

- the relative L2 error of PyTorch's own fp16 logits against its fp32 logits (and the logits' RMS);
- per module output (forward hooks, fp32 run): the RMS of the activation, and how many modules'
  RMS lies below fp16's smallest normal (6.1e-5) or its smallest subnormal (6.0e-8).

If PyTorch's fp16 error is also about 1, the weights, not Redwood, are the cause. Run it on the
GPU host with plain `python3`:

    python3 scripts/fp16_range_probe.py [--models mobilenet_v3_large,resnet50] [--batch 8]
                                        [--fan-in --export DIR]

--fan-in re-initializes every convolution's weights with kaiming_normal_(mode="fan_in") (a
depthwise layer's fan-in is its k², so the activations keep their scale) before probing, and
--export DIR writes that model to DIR/NAME_fan_in.onnx: a network Redwood's --check can test at
fp16 with the same layers and shapes as the benchmark's.
"""

import argparse
import math
import os

import torch
import torchvision

FP16_MIN_NORMAL = 6.103515625e-05
FP16_MIN_SUBNORMAL = 5.960464477539063e-08


def build(name, fan_in):
    torch.manual_seed(0)  # as bench_gpu.export: the very weights Redwood's --check runs
    ctor = {"resnet50": torchvision.models.resnet50,
            "mobilenet_v3_large": torchvision.models.mobilenet_v3_large}[name]
    model = ctor(weights=None).eval()
    if fan_in:
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
    return model


def export(model, path):
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    x = torch.randn(1, 3, 224, 224)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)
    print(f"  exported {path}")


def rel_l2(a, b):
    a, b = a.double(), b.double()
    den = torch.linalg.vector_norm(b).item()
    return torch.linalg.vector_norm(a - b).item() / den if den > 0 else float("inf")


def probe(name, batch, device, fan_in, export_dir):
    model = build(name, fan_in)
    if export_dir:
        export(model, os.path.join(export_dir, f"{name}{'_fan_in' if fan_in else ''}.onnx"))
    model = model.to(device)
    x = torch.randn(batch, 3, 224, 224, device=device)
    rms = []

    def hook(module, _inputs, output):
        if isinstance(output, torch.Tensor) and not list(module.children()):
            rms.append((module.__class__.__name__, output.float().pow(2).mean().sqrt().item()))

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        y32 = model(x).float()
    for h in handles:
        h.remove()
    with torch.no_grad():
        y16 = model.half()(x.half()).float()
    finite = [r for _, r in rms if math.isfinite(r)]
    print(f"{name}{' (fan-in init)' if fan_in else ''} batch {batch}: logits RMS fp32 {y32.pow(2).mean().sqrt().item():.3e}, "
          f"fp16 {y16.pow(2).mean().sqrt().item():.3e}; PyTorch fp16 vs fp32 relative L2 {rel_l2(y16, y32):.3e}")
    print(f"  {len(rms)} leaf module outputs: RMS min {min(finite):.3e}, max {max(finite):.3e}; "
          f"below fp16 min normal: {sum(r < FP16_MIN_NORMAL for r in finite)}, "
          f"below min subnormal: {sum(r < FP16_MIN_SUBNORMAL for r in finite)}")
    step = max(1, len(rms) // 12)
    print("  every {}th: {}".format(step, ", ".join(f"{n}:{r:.1e}" for n, r in rms[::step])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mobilenet_v3_large,resnet50")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--fan-in", action="store_true", help="re-initialize the convolutions with fan-in scaling")
    ap.add_argument("--export", default="", help="folder to write the (re-initialized) model to as ONNX")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("fp16_range_probe.py: no CUDA device (run it on the GPU host)")
    for name in args.models.split(","):
        probe(name, args.batch, "cuda", args.fan_in, args.export)


if __name__ == "__main__":
    main()
