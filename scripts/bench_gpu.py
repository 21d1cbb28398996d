#!/usr/bin/env python3
"""Redwood's GPU runner against PyTorch on the same GPU and the same weights.

Run on the GPU host with plain `python3` (PyTorch and torchvision there), after building and
bundling `redwood_gpu_bench` (docs/cuda.md says how):

    python3 scripts/bench_gpu.py --redwood "bash .device/run redwood_gpu_bench" --out $OUT

1. Exports torchvision's ResNet-50 and MobileNetV3-Large (weights=None, torch.manual_seed(0)) to
   ONNX (dynamic batch), so both sides run the very same weights.
2. Measures the ceilings once: a large fp16 and fp32 (no TF32) matrix product, a large
   device-to-device copy.
3. For each model, batch and precision: PyTorch eager, torch.compile (default) and
   torch.compile(mode="reduce-overhead"), median of --runs runs after warm-up, each timed with
   CUDA events; then Redwood (CUDA-graph replays, same timing) on the exported file.
4. Prints one table: the times, Redwood's speed relative to the fastest PyTorch mode, and the
   floor (max of FLOPs / measured matrix rate, minimal bytes / measured bandwidth).
5. PP-OCRv4 det (--det, default the shipped model under $REDWOOD_ASSETS) at 1x3x640x640 and
   8x3x640x640: Redwood GPU (CUDA-graph replay, and host to host: copy in, replay, copy out)
   against the Redwood CPU executor (oneDNN; timed inside redwood_gpu_bench on the same input)
   and ONNX Runtime's CPU build (the `onnxruntime` Python package, default threads), wall clock,
   median of --cpu-runs after 2 warm-ups; a second table with the ratios.

--tables pytorch,det picks the parts (e.g. `--tables det` for the PP-OCR table alone). Each part
also writes its table in markdown into --out (det_table.md, pytorch_table.md), which
scripts/cuda_device_run.sh puts into the dated results file.

PyTorch's "fp32" convolutions use TF32 by default (torch.backends.cudnn.allow_tf32); the table
states which Redwood precision runs against it (fp32 exact and tf32 both, with --precisions).
The modes of --exact-modes (default reduce-overhead) also run at fp32 with TF32 off (cuDNN and
cuBLAS), the like-for-like peer of Redwood's exact fp32; the table's last column compares the
exact rows with the fastest of them.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def export(name, out_dir):
    torch.manual_seed(0)
    ctor = {"resnet50": torchvision.models.resnet50,
            "mobilenet_v3_large": torchvision.models.mobilenet_v3_large}[name]
    model = ctor(weights=None).eval()
    path = os.path.join(out_dir, name + ".onnx")
    x = torch.randn(1, 3, 224, 224)
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)
    return model, path


def time_cuda(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def ceilings():
    n = 8192
    out = {}
    for label, dtype in (("fp16", torch.float16), ("fp32", torch.float32)):
        torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = time_cuda(lambda: a @ b, 10, 3)
        out[label + "_flops"] = 2 * n ** 3 / (ms * 1e-3)
    torch.backends.cuda.matmul.allow_tf32 = True
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    out["tf32_flops"] = 2 * n ** 3 / (time_cuda(lambda: a @ b, 10, 3) * 1e-3)
    torch.backends.cuda.matmul.allow_tf32 = False
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_cuda(lambda: dst.copy_(src), 20, 3)
    out["bandwidth"] = 2 * src.numel() / (ms * 1e-3)
    return out


def pytorch_times(model, batch, precision, modes, runs, warmup, tf32=True):
    """Median ms per mode; tf32=False turns TF32 off in cuDNN and cuBLAS for these runs."""
    dtype = torch.float16 if precision == "fp16" else torch.float32
    m = model.to("cuda", dtype)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype)
    result = {}
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    with torch.inference_mode():
        for mode in modes:
            torch._dynamo.reset()
            t0 = time.time()
            if mode == "eager":
                fn = m
            elif mode == "compile":
                fn = torch.compile(m)
            else:
                fn = torch.compile(m, mode="reduce-overhead")
            try:
                result[mode] = time_cuda(lambda: fn(x), runs, warmup)
            except Exception as e:  # a mode that fails here is reported, not fatal
                log(f"pytorch {mode} failed: {e}")
                result[mode] = float("nan")
            log(f"  pytorch {mode}{'' if tf32 else ' (no tf32)'}: {result[mode]:.3f} ms "
                f"({time.time() - t0:.0f} s with compile)")
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
    return result


def redwood_time(cmd, path, batch, precision, runs, warmup, shape="3,224,224", cpu_runs=0):
    args = shlex.split(cmd) + [path, "--batch", str(batch), "--precision", precision,
                               "--runs", str(runs), "--warmup", str(warmup), "--shape", shape]
    if cpu_runs:
        args += ["--cpu-runs", str(cpu_runs)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        log(f"  redwood failed: {p.stderr.strip()}")
        return None
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def ort_cpu_time(path, batch, runs):
    """ONNX Runtime's CPU build on the same model and shape: median and min wall ms, version."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        log(f"  onnxruntime: not importable ({e})")
        return None
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    x = np.random.default_rng(1).uniform(-1, 1, (batch, 3, 640, 640)).astype(np.float32)
    for _ in range(2):
        sess.run(None, {name: x})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "version": ort.__version__,
            "threads": os.cpu_count()}


def det_table(a):
    """PP-OCRv4 det: Redwood GPU against Redwood CPU and ONNX Runtime CPU."""
    rows = []
    if not os.path.exists(a.det):
        log(f"PP-OCRv4 det: {a.det} is missing (--det, or REDWOOD_ASSETS); the det table is skipped")
        return rows
    for batch in (int(b) for b in a.det_batches.split(",")):
        ort_t = ort_cpu_time(a.det, batch, a.cpu_runs)
        log(f"det batch {batch}: onnxruntime cpu " + (f"{ort_t['median_ms']:.1f} ms" if ort_t else "n/a"))
        cpu = None
        for i, rp in enumerate(a.det_precisions.split(",")):
            # The Redwood CPU executor runs once per batch, with the first precision's GPU run.
            rw = redwood_time(a.redwood, a.det, batch, rp, a.runs, a.warmup, shape="3,640,640",
                              cpu_runs=a.cpu_runs if i == 0 else 0)
            if rw and rw.get("cpu_runs", 0) > 0:
                cpu = {"median_ms": rw["cpu_median_ms"], "min_ms": rw["cpu_min_ms"], "threads": rw["cpu_threads"],
                       "vs_gpu_rel_l2": rw["cpu_vs_gpu_rel_l2"]}
            if rw:
                log(f"  redwood gpu {rp}: {rw['median_ms']:.3f} ms replay, {rw['host_median_ms']:.3f} ms host to host"
                    + (f"; redwood cpu {cpu['median_ms']:.1f} ms (rel L2 to gpu {cpu['vs_gpu_rel_l2']:.2g})" if cpu and i == 0 else ""))
            rows.append({"batch": batch, "redwood_precision": rp, "redwood": rw, "redwood_cpu": cpu, "ort_cpu": ort_t})
    return rows


def print_det(rows):
    nan = float("nan")
    print(f"\nPP-OCRv4 det, 3x640x640 (wall clock on the CPU sides; GPU replay with CUDA events)")
    print(f"{'bs':>3} {'gpu prec':<9}{'gpu replay':>11}{'gpu h2h':>9}{'rw cpu':>9}{'ort cpu':>9}"
          f"{'gpu/rw cpu':>11}{'gpu/ort':>9}{'h2h/ort':>9}{'rw cpu/ort':>11}")
    for r in rows:
        rw, cpu, ort_t = r["redwood"] or {}, r["redwood_cpu"] or {}, r["ort_cpu"] or {}
        g, h = rw.get("median_ms", nan), rw.get("host_median_ms", nan)
        c, o = cpu.get("median_ms", nan), ort_t.get("median_ms", nan)
        # Ratios are speed-ups: how many times faster the first is than the second.
        print(f"{r['batch']:>3} {r['redwood_precision']:<9}{g:>11.3f}{h:>9.3f}{c:>9.1f}{o:>9.1f}"
              f"{c / g:>10.1f}x{o / g:>8.1f}x{o / h:>8.1f}x{o / c:>10.2f}x")


MODEL_NAMES = {"resnet50": "ResNet-50", "mobilenet_v3_large": "MobileNetV3-L"}


def ratio(x, target=1.25):
    """A speed-up as the tables print it: bold where it meets the 1.25x aim."""
    if x != x:
        return "n/a"
    text = f"{x:.2f}\u00d7"
    return f"**{text}**" if x >= target else text


def det_markdown(rows):
    """The det table in markdown, with ONNX Runtime's version and the CPU-GPU agreement."""
    nan = float("nan")
    out = ["| batch | GPU precision | GPU replay ms | GPU host to host ms | Redwood CPU ms | ORT CPU ms "
           "| GPU / Redwood CPU | GPU / ORT | host-to-host / ORT | Redwood CPU / ORT |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ort_versions, agreement = set(), {}
    for r in rows:
        rw, cpu, ort_t = r["redwood"] or {}, r["redwood_cpu"] or {}, r["ort_cpu"] or {}
        g, h = rw.get("median_ms", nan), rw.get("host_median_ms", nan)
        c, o = cpu.get("median_ms", nan), ort_t.get("median_ms", nan)
        if "version" in ort_t:
            ort_versions.add(ort_t["version"])
        if "vs_gpu_rel_l2" in cpu:
            agreement[r["batch"]] = cpu["vs_gpu_rel_l2"]
        out.append(f"| {r['batch']} | {r['redwood_precision']} | {g:.3f} | {h:.3f} | {c:.1f} | {o:.1f} "
                   f"| {c / g:.1f}\u00d7 | {o / g:.1f}\u00d7 | {o / h:.1f}\u00d7 | {o / c:.2f}\u00d7 |")
    out.append("")
    out.append("ONNX Runtime " + (", ".join(sorted(ort_versions)) or "not importable") + ", CPU execution provider, "
               f"default threads ({os.cpu_count()} cores). Redwood CPU against GPU outputs, relative L2: "
               + (", ".join(f"batch {b} {v:.2g}" for b, v in sorted(agreement.items())) or "not measured") + ".")
    return "\n".join(out) + "\n"


def pytorch_markdown(rows, ceil):
    """The PyTorch table in markdown, after the versions and the ceilings it was measured with."""
    nan = float("nan")
    out = [f"torch {torch.__version__} (CUDA {torch.version.cuda}), torchvision {torchvision.__version__}; "
           f"ceilings measured in the same call: fp16 {ceil['fp16_flops'] / 1e12:.0f} TFLOP/s, "
           f"TF32 {ceil['tf32_flops'] / 1e12:.0f}, fp32 {ceil['fp32_flops'] / 1e12:.1f}, "
           f"{ceil['bandwidth'] / 1e12:.1f} TB/s.", "",
           "| model | batch | PyTorch precision | Redwood | eager ms | compile ms | reduce-overhead ms | Redwood ms "
           "| Redwood speed vs fastest | floor ms | Redwood / floor | PyTorch no-TF32 ms | speed vs it |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        pt, rw = r["pytorch"], r["redwood"]
        finite = [v for v in pt.values() if v == v]
        best = min(finite) if finite else nan
        rw_ms, floor = nan, nan
        if rw:
            rate = ceil["fp16_flops"] if r["redwood_precision"] == "fp16" else (
                ceil["tf32_flops"] if r["redwood_precision"] == "tf32" else ceil["fp32_flops"])
            floor = max(rw["flops"] / rate, rw["min_bytes"] / ceil["bandwidth"]) * 1e3
            rw_ms = rw["median_ms"]
        over_floor = rw_ms / floor
        over_floor_text = f"{over_floor:.0f}\u00d7" if over_floor >= 100 else f"{over_floor:.1f}\u00d7"
        exact = [v for v in r.get("pytorch_exact", {}).values() if v == v]
        exact_cells = f"{min(exact):.3f} | {ratio(min(exact) / rw_ms)}" if exact else " | "
        # Redwood's fp32 is exact through 3xTF32 products (its NHWC groups, on by default).
        label = "fp32 (3xTF32)" if r["redwood_precision"] == "fp32" else r["redwood_precision"]
        out.append(f"| {MODEL_NAMES.get(r['model'], r['model'])} | {r['batch']} | {r['precision']} | {label} "
                   f"| {pt.get('eager', nan):.3f} | {pt.get('compile', nan):.3f} | {pt.get('reduce-overhead', nan):.3f} "
                   f"| {rw_ms:.3f} | {ratio(best / rw_ms)} | {floor:.3f} | {over_floor_text} | {exact_cells} |")
    return "\n".join(out) + "\n"


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def exact_cols(pt_exact, rw_ms):
    """The fastest PyTorch mode with TF32 off and Redwood's speed against it, for exact rows."""
    finite = [v for v in pt_exact.values() if v == v]
    if not finite:
        return ""
    best = min(finite)
    return f"{best:>10.3f}{best / rw_ms:>9.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redwood", required=True, help="command that runs redwood_gpu_bench")
    ap.add_argument("--out", default="/tmp/redwood-bench", help="folder for the ONNX files and results.json")
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp16,fp32", help="Redwood precisions; fp32 also runs tf32")
    ap.add_argument("--modes", default="eager,reduce-overhead,compile")
    ap.add_argument("--exact-modes", default="reduce-overhead",
                    help="PyTorch modes also run at fp32 with TF32 off (empty: none)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=20)
    assets = os.environ.get("REDWOOD_ASSETS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets"))
    ap.add_argument("--tables", default="pytorch,det", help="which parts run: pytorch, det")
    ap.add_argument("--det", default=os.path.join(assets, "models", "ch_PP-OCRv4_det_infer.onnx"),
                    help="PP-OCRv4 det ONNX file")
    ap.add_argument("--det-batches", default="1,8")
    ap.add_argument("--det-precisions", default="fp32,fp16", help="Redwood GPU precisions for det; the first also times the CPU")
    ap.add_argument("--cpu-runs", type=int, default=10, help="CPU-side runs (Redwood CPU, ONNX Runtime) per case")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tables = a.tables.split(",")
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if "det" in tables:  # CPU-heavy and independent of PyTorch: runs first, so a cut-off run keeps it
        det_rows = det_table(a)
        with open(os.path.join(a.out, "det_results.json"), "w") as f:
            json.dump({"rows": det_rows}, f, indent=1)
        print_det(det_rows)
        write_text(os.path.join(a.out, "det_table.md"), det_markdown(det_rows))
        sys.stdout.flush()
    if "pytorch" not in tables:
        return
    ceil = ceilings()
    log("ceilings: " + ", ".join(f"{k} {v / 1e12:.1f} T/s" for k, v in ceil.items()))
    rows = []
    for name in a.models.split(","):
        model, path = export(name, a.out)
        for batch in (int(b) for b in a.batches.split(",")):
            for precision in a.precisions.split(","):
                log(f"{name} batch {batch} {precision}")
                pt = pytorch_times(model, batch, precision, a.modes.split(","), a.runs, a.warmup)
                exact_modes = [m for m in a.exact_modes.split(",") if m]
                pt_exact = (pytorch_times(model, batch, precision, exact_modes, a.runs, a.warmup, tf32=False)
                            if precision == "fp32" and exact_modes else {})
                redwood_precisions = ["fp16"] if precision == "fp16" else ["fp32", "tf32"]
                for rp in redwood_precisions:
                    rw = redwood_time(a.redwood, path, batch, rp, a.runs, a.warmup)
                    rows.append({"model": name, "batch": batch, "precision": precision, "redwood_precision": rp,
                                 "pytorch": pt, "pytorch_exact": pt_exact if rp == "fp32" else {}, "redwood": rw})
                    if rw:
                        log(f"  redwood {rp}: {rw['median_ms']:.3f} ms")
                with open(os.path.join(a.out, "results.json"), "w") as f:  # kept current: a cut-off run keeps its rows
                    json.dump({"ceilings": ceil, "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"ceilings": ceil, "rows": rows}, f, indent=1)
    write_text(os.path.join(a.out, "pytorch_table.md"), pytorch_markdown(rows, ceil))
    print(f"\n{'model':<20}{'bs':>4} {'prec':<5}{'rw':<5}{'eager':>9}{'compile':>9}{'reduce-oh':>10}"
          f"{'redwood':>10}{'speed vs best':>15}{'floor':>9}{'rw/floor':>9}{'pt exact':>10}{'vs exact':>10}")
    for r in rows:
        pt, rw = r["pytorch"], r["redwood"]
        finite = [v for v in pt.values() if v == v]
        best = min(finite) if finite else float("nan")
        if rw:
            rate = ceil["fp16_flops"] if r["redwood_precision"] == "fp16" else (
                ceil["tf32_flops"] if r["redwood_precision"] == "tf32" else ceil["fp32_flops"])
            floor = max(rw["flops"] / rate, rw["min_bytes"] / ceil["bandwidth"]) * 1e3
            rw_ms = rw["median_ms"]
        else:
            floor, rw_ms = float("nan"), float("nan")
        print(f"{r['model']:<20}{r['batch']:>4} {r['precision']:<5}{r['redwood_precision']:<5}"
              f"{pt.get('eager', float('nan')):>9.3f}{pt.get('compile', float('nan')):>9.3f}"
              f"{pt.get('reduce-overhead', float('nan')):>10.3f}{rw_ms:>10.3f}{best / rw_ms:>14.2f}x"
              f"{floor:>9.3f}{rw_ms / floor:>8.1f}x{exact_cols(r.get('pytorch_exact', {}), rw_ms)}")


if __name__ == "__main__":
    main()
