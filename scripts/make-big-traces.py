#!/usr/bin/env python3
"""Large PyTorch profiler traces for benchmarking `topo-tune diagnose --trace`: the events of
a real trace repeated, each copy shifted by the trace's span (timestamps, correlation and
External ids and step numbers offset, so every copy is new work), until each file reaches
the size asked; one file per rank.

    python3 scripts/make-big-traces.py tests/data/traces/sampled_rank-0.json.gz OUTDIR RANKS MB
"""
import gzip
import json
import sys


def main(src, out, ranks, megabytes):
    opener = gzip.open if open(src, "rb").read(2) == b"\x1f\x8b" else open
    with opener(src, "rt") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    lo = min(e["ts"] for e in events)
    span = max(e["ts"] + e.get("dur", 0) for e in events) - lo + 1000
    steps = [int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#")]
    step_stride = max(steps) - min(steps) + 1 if steps else 1
    target = megabytes << 20
    for rank in range(ranks):
        path = f"{out}/rank-{rank}.json"
        with open(path, "w") as f:
            info = dict(doc.get("distributedInfo") or {}, rank=rank, world_size=ranks)
            f.write('{"schemaVersion":1,"distributedInfo":%s,"traceEvents":[\n' % json.dumps(info))
            written, copy, first = 0, 0, True
            while written < target:
                shift = copy * span
                for e in events:
                    e2 = dict(e, ts=e["ts"] + shift)
                    args = e2.get("args")
                    if args:
                        args = dict(args)
                        for key in ("correlation", "External id"):
                            if isinstance(args.get(key), int):
                                args[key] += copy * 10_000_000
                        e2["args"] = args
                    name = e2.get("name", "")
                    if name.startswith("ProfilerStep#"):
                        e2["name"] = "ProfilerStep#%d" % (int(name.split("#")[1]) + copy * step_stride)
                    line = json.dumps(e2, separators=(",", ":"))
                    f.write(("" if first else ",\n") + line)
                    first = False
                    written += len(line) + 2
                copy += 1
            f.write("\n]}\n")
        print(path, written >> 20, "MiB", copy, "copies")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
