#!/usr/bin/python3
"""Writes candidate seed inputs for every fuzz target into OUT/<target>/, from the JSON, CSV and XML the
tests already hold (raw string literals of tests/**/*.cpp, tests/**/data, examples in docs/ and deploy/).
scripts/fuzz --reseed merges them into fuzz/corpus/<target>/ with libFuzzer's -merge=1, which keeps only
the candidates that add coverage. Usage: seed_candidates.py ROOT OUT"""
import glob
import hashlib
import json
import os
import re
import sys

MESSAGE_READERS = 42  # fuzz_messages.cpp: readers().size()


def literals(root):
    out = []
    for path in glob.glob(os.path.join(root, "tests/**/*.cpp"), recursive=True):
        text = open(path, encoding="utf-8", errors="replace").read()
        out += re.findall(r'R"\((.*?)\)"', text, flags=re.S)
    for path in glob.glob(os.path.join(root, "docs/*.md")) + glob.glob(os.path.join(root, "deploy/**/*.json"), recursive=True):
        text = open(path, encoding="utf-8", errors="replace").read()
        out += re.findall(r"```json\n(.*?)```", text, flags=re.S)
        if path.endswith(".json"):
            out.append(text)
    out += [open(p).read() for p in glob.glob(os.path.join(root, "tests/**/*.json"), recursive=True)]
    return out


def nested(value):
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from nested(v)
    elif isinstance(value, list):
        for v in value:
            yield from nested(v)


def main():
    root, out = sys.argv[1], sys.argv[2]
    candidates = {}

    def add(target, data):
        if isinstance(data, str):
            data = data.encode()
        if len(data) > 65536:
            return
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
        candidates[target] = candidates.get(target, 0) + 1

    texts = literals(root)
    values = []
    for t in texts:
        add("fuzz_json", t)
        try:
            values.append(json.loads(t))
        except ValueError:
            pass
    parts = set()
    for v in values:
        for p in nested(v):
            if isinstance(p, (dict, list)):
                parts.add(json.dumps(p, separators=(",", ":")))
    parts = sorted(parts)
    for p in parts:
        for i in range(MESSAGE_READERS):
            add("fuzz_messages", bytes([i]) + p.encode())
        for i in range(3):
            add("fuzz_schedules", bytes([i]) + p.encode())
    layouts = [p for p in parts if '"tp"' in p and '"dp"' in p]
    plans = [p for p in parts if '"strategy"' in p]
    requests = [p for p in parts if '"action"' in p]
    for l in layouts[:40]:
        for p in plans[:40]:
            add("fuzz_plan_check", l + "\0" + p + "\0")
        for r in requests[:40]:
            add("fuzz_plan_check", l + "\0\0" + r)
    for path in glob.glob(os.path.join(root, "tests/analysis/data/*.csv")):
        data = open(path, "rb").read()
        add("fuzz_trace_csv", b"\x01" + data)
        add("fuzz_trace_csv", b"\x00" + data)
    for path in glob.glob(os.path.join(root, "tests/validate/data/*.xml")):
        add("fuzz_graph_dump", open(path, "rb").read())
    # Rings: the healthy one whole, cut, and with its header fields patched (offset, length, bytes).
    add("fuzz_ring", b"\xff\xff")
    add("fuzz_ring", b"\x40\x00")
    for offset in range(0, 256, 8):
        add("fuzz_ring", b"\xff\xff" + bytes([offset, 0, 8]) + b"\xff" * 8)
        add("fuzz_ring", b"\xff\xff" + bytes([offset, 0, 8]) + b"\x00" * 8)
    for offset in range(4096, 4096 + 40 * 128, 128):
        add("fuzz_ring", b"\xff\xff" + bytes([offset & 0xff, offset >> 8, 8]) + b"\x01" * 8)
    print(" ".join(f"{k}: {v}" for k, v in sorted(candidates.items())))


if __name__ == "__main__":
    main()
