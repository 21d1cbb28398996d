#!/usr/bin/python3
"""Reference decode of a detector's outputs, for Redwood's detect stage fidelity test.

Written apart from stages/postprocess/detect.cpp (numpy, float64, vectorized) to the same rules:
  ssd      boxes [1, B, 4], scores [1, B, C]: every class above the score threshold (the
           background left out); boxes corners x1, y1, x2, y2 normalized, or offsets against
           priors (--anchors, the UltraFace/RetinaFace layout);
  yolo_v5  one output [1, B, 5 + C] (--boxes): cx, cy, w, h in input pixels, objectness x the best
           class's score.
Boxes are mapped to the picture (picture = (tensor - pad) / scale) and clipped, those left empty
dropped, then greedy per-class NMS in model-input pixels (IoU above the threshold suppresses),
best score first, at most --max-detections.

  detect_reference.py [--format ssd] --boxes B.npy --scores S.npy --transform SX,SY,PX,PY,TW,TH \
      --picture W,H [--score-threshold 0.25] [--iou-threshold 0.45] [--background 0] \
      [--max-detections 300] [--anchors '{"steps": [8], "min_sizes": [[10]], "variances": [0.1, 0.2]}']
  detect_reference.py --format yolo_v5 --boxes OUT.npy --transform ... --picture W,H ...

Prints one JSON list: [{"class_id": c, "score": s, "box": [x, y, width, height]}, ...].
"""
import argparse
import json
import math

import numpy as np


def priors(spec, width, height):
    """Centre-form priors, normalized: feature maps by step, cells row by row, sizes inner."""
    out = []
    for step, sizes in zip(spec["steps"], spec["min_sizes"]):
        cells_x, cells_y = math.ceil(width / step), math.ceil(height / step)
        for y in range(cells_y):
            for x in range(cells_x):
                if spec.get("centers", "cells") == "cells":
                    cx, cy = (x + 0.5) / cells_x, (y + 0.5) / cells_y
                else:
                    cx, cy = (x + 0.5) * step / width, (y + 0.5) * step / height
                for s in sizes:
                    out.append([cx, cy, s / width, s / height])
    p = np.array(out, dtype=np.float64)
    return np.clip(p, 0.0, 1.0) if spec.get("clip", True) else p


def iou(box, others):
    """IoU of one corner box with many."""
    w = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    h = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    inter = np.where((w > 0) & (h > 0), w * h, 0.0)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    return inter / (area(box) + area(others) - inter)


def ssd_corners(args, tw, th):
    """An SSD's boxes as corners in model-input pixels."""
    boxes = np.load(args.boxes).astype(np.float64)[0]  # [B, 4]
    if args.anchors:
        spec = json.loads(args.anchors)
        v0, v1 = spec.get("variances", [0.1, 0.2])
        p = priors(spec, int(tw), int(th))
        assert len(p) == len(boxes), f"{len(p)} priors for {len(boxes)} boxes"
        centre = p[:, :2] + boxes[:, :2] * v0 * p[:, 2:]
        size = p[:, 2:] * np.exp(boxes[:, 2:] * v1)
        boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
    return boxes * np.array([tw, th, tw, th])


def candidates(args, tw, th):
    """(box index, class, score) above the threshold, and every box's corners in input pixels."""
    if args.format == "yolo_v5":
        rows = np.load(args.boxes).astype(np.float64)[0]  # [B, 5 + C]
        best = np.argmax(rows[:, 5:], axis=1)
        score = rows[:, 4] * rows[np.arange(len(rows)), 5 + best]
        corners = np.concatenate([rows[:, :2] - rows[:, 2:4] / 2, rows[:, :2] + rows[:, 2:4] / 2], axis=1)
        return [(i, best[i], score[i]) for i in np.nonzero(score >= args.score_threshold)[0]], corners
    scores = np.load(args.scores).astype(np.float64)[0]  # [B, C]
    found = [(i, c, scores[i, c]) for i, c in zip(*np.nonzero(scores >= args.score_threshold)) if c != args.background]
    return found, ssd_corners(args, tw, th)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--format", choices=["ssd", "yolo_v5"], default="ssd")
    a.add_argument("--boxes", required=True)
    a.add_argument("--scores")
    a.add_argument("--transform", required=True)
    a.add_argument("--picture", required=True)
    a.add_argument("--score-threshold", type=float, default=0.25)
    a.add_argument("--iou-threshold", type=float, default=0.45)
    a.add_argument("--background", type=int, default=0)
    a.add_argument("--max-detections", type=int, default=300)
    a.add_argument("--anchors")
    args = a.parse_args()
    sx, sy, px, py, tw, th = (float(v) for v in args.transform.split(","))
    pw, ph = (float(v) for v in args.picture.split(","))

    found = []  # (score, class, input-pixel corners, picture box, box index)
    chosen, corners = candidates(args, tw, th)
    for i, c, score in chosen:
        x1, y1, x2, y2 = corners[i]
        if not (x2 > x1 and y2 > y1):
            continue
        left, top = max((x1 - px) / sx, 0.0), max((y1 - py) / sy, 0.0)
        right, bottom = min((x2 - px) / sx, pw), min((y2 - py) / sy, ph)
        if right <= left or bottom <= top:
            continue
        found.append((score, c, corners[i], [left, top, right - left, bottom - top], i))
    # Best first; equal scores in the order Redwood's decoder meets them (box, then class).
    found.sort(key=lambda f: (-f[0], f[4], f[1]))
    kept = []
    for f in found:
        if len(kept) >= args.max_detections:
            break
        same = [k[2] for k in kept if k[1] == f[1]]
        if same and np.any(iou(f[2], np.array(same)) > args.iou_threshold):
            continue
        kept.append(f)
    print(json.dumps([{"class_id": int(c), "score": float(s), "box": [float(v) for v in b]} for s, c, _, b, _ in kept]))


if __name__ == "__main__":
    main()
