#!/usr/bin/python3
"""Subscribe to a Redwood pipeline's results (ZeroMQ, schema redwood.frame/1) and print them.

    /usr/bin/python3 apps/examples/subscribe.py tcp://127.0.0.1:5555 [TOPIC_PREFIX] [--count N]

Each message has two parts: the topic "<pipeline>/<stream>" and one JSON object per frame
(docs/pipelines.md describes the fields). Needs python3-zmq (Debian: apt-get install python3-zmq).

A sink with `curve` takes only CURVE clients whose public key it lists: add
--server-key keys/server.key --client-key keys/me.key_secret (certificates as `redwood keygen`
and zmq.auth.create_certificates write them).
"""
import argparse
import json
import struct
import sys
from typing import NoReturn

import zmq
import zmq.auth
from zmq.utils import z85

SCHEMA = "redwood.frame/1"


def fail(message: str) -> NoReturn:
    print(f"subscribe.py: {message}", file=sys.stderr)
    sys.exit(2)


def is_z85_key(key: bytes) -> bool:
    try:
        return len(z85.decode(key)) == 32
    except (KeyError, ValueError, struct.error):  # what z85.decode raises on text that is not Z85
        return False


def load_key(path: str, secret: bool) -> tuple:
    """(public, secret) Z85 keys of a ZeroMQ certificate file, checked; exits 2 naming the file."""
    try:
        public_key, secret_key = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a CURVE certificate: {e}")
    if secret and secret_key is None:
        fail(f"{path}: no secret-key line (give NAME.key_secret, not NAME.key)")
    for name, key in (("public-key", public_key), ("secret-key", secret_key)):
        if key is not None and not is_z85_key(key):
            fail(f"{path}: {name} is not a CURVE key (40 Z85 characters)")
    return public_key, secret_key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", help="e.g. tcp://127.0.0.1:5555")
    parser.add_argument("topic", nargs="?", default="", help="topic prefix, e.g. ocr-video/ (default: all)")
    parser.add_argument("--count", type=int, default=0, help="stop after N messages (0: never)")
    parser.add_argument("--timeout", type=float, default=0, help="stop after this many idle seconds (0: never)")
    parser.add_argument("--server-key", help="CURVE: the sink's public certificate (NAME.key)")
    parser.add_argument("--client-key", help="CURVE: this client's secret certificate (NAME.key_secret)")
    args = parser.parse_args()
    if (args.server_key is None) != (args.client_key is None):
        parser.error("CURVE needs both --server-key and --client-key")

    socket = zmq.Context.instance().socket(zmq.SUB)
    if args.server_key is not None:
        socket.curve_serverkey = load_key(args.server_key, secret=False)[0]
        socket.curve_publickey, socket.curve_secretkey = load_key(args.client_key, secret=True)
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
