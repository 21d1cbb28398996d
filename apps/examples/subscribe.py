#!/usr/bin/python3
"""Subscribe to a Redwood pipeline's results (ZeroMQ, schema redwood.frame/1) and print them.

    /usr/bin/python3 apps/examples/subscribe.py tcp://127.0.0.1:5555 [TOPIC_PREFIX] [--count N]

Each message has two parts: the topic "<pipeline>/<stream>" and one JSON object per frame
(docs/pipelines.md describes the fields). Needs python3-zmq (Debian: apt-get install python3-zmq).
"""
import argparse
import json
import sys

import zmq

SCHEMA = "redwood.frame/1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", help="e.g. tcp://127.0.0.1:5555")
    parser.add_argument("topic", nargs="?", default="", help="topic prefix, e.g. ocr-video/ (default: all)")
    parser.add_argument("--count", type=int, default=0, help="stop after N messages (0: never)")
    parser.add_argument("--timeout", type=float, default=0, help="stop after this many idle seconds (0: never)")
    args = parser.parse_args()

    socket = zmq.Context.instance().socket(zmq.SUB)
    socket.setsockopt_string(zmq.SUBSCRIBE, args.topic)
    if args.timeout > 0:
        socket.setsockopt(zmq.RCVTIMEO, int(args.timeout * 1000))
    socket.connect(args.endpoint)
    received = 0
    while args.count == 0 or received < args.count:
        try:
            topic, body = socket.recv_multipart()
        except zmq.Again:
            break
        frame = json.loads(body)
        if frame.get("schema") != SCHEMA:
            print(f"skipping a message of schema {frame.get('schema')!r}", file=sys.stderr)
            continue
        received += 1
        found = []
        for d in frame["detections"]:
            label = d.get("text") or d["kind"]
            x, y, w, h = d["box"]
            found.append(f"{label!r} {d['score']:.2f} at ({x:.0f},{y:.0f} {w:.0f}x{h:.0f})")
        # Per-stage times (ms after capture); an addition to redwood.frame/1, so read with .get().
        stages = frame.get("timestamps", {}).get("stages", [])
        breakdown = " [" + " ".join(f"{s['stage']} {s['done_ms']:.0f}" for s in stages) + "]" if stages else ""
        print(f"{topic.decode()} #{frame['seq']} {frame['latency_ms']:.0f} ms{breakdown}: " + ("; ".join(found) or "-"),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
