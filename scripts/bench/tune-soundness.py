#!/usr/bin/env python3
"""How sound `topo-tune tune`'s decisions are, over many seeds of the nccl-tests double.

Runs the whole command (`topo-tune tune --output json`) on one paper node (p5en: 8 GPUs)
with the double (tests/data/nccl-tests/fake_all_reduce_perf) as the benchmark, all-reduce
only, sizes 8 B to 8 MiB by 8, per-size noise drawn independently for every size and run,
and prints one table row per scenario:

  null N %     no candidate differs from NCCL's own choice (FAKE_NCCL_FORCED=1): any rule or
               global kept is spurious
  gain G @ N % ring/ll128 is G faster than NCCL's own from 8 B to 32 KiB (4 measured sizes),
               every other candidate equal to NCCL's own: power (a rule found), rules per true
               range, pinned channel counts (a count in a rule changes nothing here), and the
               share of the true range's bytes covered between its first and last winning
               measured size (8 B .. 32 KiB)

`--binary OLD` runs another build the same way (an older tune forced pairs with NCCL_ALGO /
NCCL_PROTO and channel counts with NCCL_MIN/MAX_NCHANNELS; the double answers both ways, and
for that build every `ring/ll128×N` is named as good as the pair, as the plugin run sees it).

  scripts/bench/tune-soundness.py [--seeds 30] [--binary PATH] [--jobs 2] [--only ROW]

A benchmark, not a test: it takes minutes. A few fixed seeds of it are in tests/tune.rs.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(ROOT, "tests/data/nccl-tests/fake_all_reduce_perf")
TRUE_LO, TRUE_HI = 8, 32768
ROWS = {
    "null 1 %": (None, 0.01),
    "null 3 %": (None, 0.03),
    "null 5 %": (None, 0.05),
    "null 8 %": (None, 0.08),
    "gain 5 % @ 3 %": (0.95, 0.03),
    "gain 10 % @ 3 %": (0.90, 0.03),
}


def knobs(factor, old):
    if factor is None:
        return ""
    spec = [f"ring/ll128@{TRUE_LO}-65535*{factor}"]
    if old:
        spec += [f"ring/ll128x{n}@{TRUE_LO}-65535*{factor}" for n in (4, 8, 16, 32)]
    return "FAKE_NCCL_TUNE='" + ";".join(spec) + "'"


def one(binary, old, row, seed):
    factor, noise = ROWS[row]
    with tempfile.TemporaryDirectory(prefix="tt-sound-") as d:
        cfg = os.path.join(d, "cluster.yaml")
        cmd = (f"FAKE_NCCL_STATE={d}/counter FAKE_NCCL_RANKS={{ranks}} FAKE_NCCL_HOSTS={{hosts}} "
               f"FAKE_NCCL_FORCED=1 FAKE_NCCL_SEED={seed} FAKE_NCCL_SIZE_NOISE={noise} {knobs(factor, old)} "
               f"python3 {DOUBLE} -b 8 -e 8M -f 8 -g 1 -I 1 -J {{json}}")
        with open(cfg, "w") as f:
            f.write('nccl_version: "2.30.7"\nbenchmark:\n'
                    f'  command: "{cmd}"\n  timeout: 60\n'
                    'nodes:\n  - host: "p5en-01"\n    labels: {rack: rack-1}\n    simulate: aws-p5en\n')
        args = [binary, "--output", "json", "tune", "--cluster-config", cfg, "--canary", "rack-1",
                "--collectives", "all_reduce", "--output-dir", os.path.join(d, "out")]
        if not old:
            args += ["--node-files", os.path.join(d, "nodes"), "--state-dir", os.path.join(d, "state")]
        p = subprocess.run(args, capture_output=True, text=True, timeout=3600)
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError:
            return {"error": (p.stdout + p.stderr)[-400:]}
        if doc.get("failed"):
            return {"error": doc.get("msg", "")[:400]}
        t = doc["tuning"]
        rules = t["rules"]
        true_rules = [r for r in rules if r["collective"] == "all_reduce"
                      and r["min_bytes"] <= TRUE_HI and r["max_bytes"] >= TRUE_LO
                      and r["algorithm"] == "ring" and r["protocol"] == "ll128"]
        covered = 0
        for r in true_rules:
            lo, hi = max(r["min_bytes"], TRUE_LO), min(r["max_bytes"], TRUE_HI)
            covered += max(0, hi - lo + 1)
        return {
            "spurious": len(rules) - len(true_rules) + len(t["globals"]),
            "true_rules": len(true_rules),
            "pinned": sum(1 for r in true_rules if r.get("channels") is not None),
            "coverage": covered / (TRUE_HI - TRUE_LO + 1),
            "runs": doc["benchmark_rounds"],
        }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/topo-tune"))
    ap.add_argument("--old", action="store_true", help="the binary forces pairs with NCCL_ALGO/NCCL_PROTO")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", help="run only these rows")
    a = ap.parse_args()
    rows = [r for r in ROWS if not a.only or r in a.only]
    print(f"binary: {a.binary}; {a.seeds} seeds per row; all_reduce, 8 B..8 MiB by 8, one p5en node")
    print(f"{'row':<18} {'spurious runs':>14} {'power':>7} {'1 rule/range':>13} {'pinned':>7} {'coverage':>9} {'runs/tune':>10} {'errors':>7}")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for row in rows:
            res = list(pool.map(lambda s: one(a.binary, a.old, row, s), range(1, a.seeds + 1)))
            ok = [r for r in res if "error" not in r]
            errs = [r["error"] for r in res if "error" in r]
            n = max(len(ok), 1)
            spurious = sum(1 for r in ok if r["spurious"] > 0) / n
            found = [r for r in ok if r["true_rules"] > 0]
            power = len(found) / n
            single = sum(1 for r in found if r["true_rules"] == 1) / max(len(found), 1)
            pinned = sum(r["pinned"] for r in found) / max(sum(r["true_rules"] for r in found), 1)
            coverage = sum(r["coverage"] for r in found) / max(len(found), 1)
            runs = sum(r["runs"] for r in ok) / n
            true_row = ROWS[row][0] is not None
            print(f"{row:<18} {spurious:>13.0%} {power if true_row else float('nan'):>7.0%} "
                  f"{single if true_row else float('nan'):>13.0%} {pinned if true_row else float('nan'):>7.0%} "
                  f"{coverage if true_row else float('nan'):>9.0%} {runs:>10.1f} {len(errs):>7}", flush=True)
            for e in errs[:2]:
                print(f"    error: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
