#!/usr/bin/env python3
"""An independent cross-check of `topo-tune diagnose --trace`: the same figures from one
PyTorch profiler trace, computed the plain way (json.load, HTA's regular expressions as
HolisticTraceAnalysis writes them, brute interval merging). Prints one JSON object.

    python3 check_trace.py TRACE.json[.gz]
"""
import gzip
import json
import re
import sys
from decimal import ROUND_HALF_UP, Decimal

# hta/common/types.py @ f4d0062c: the kernel classes, tried in this order.
COMM = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)"
    r"|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)"
    r"|(^collective_subgraph_execution)"
)
# topo-tune's one departure from HTA: collectives that run as kernels of their own (PyTorch's
# symmetric memory, vLLM's custom all-reduce) are communication, by the kernel's own name.
SYMM = re.compile(r"^(multimem_|one_shot_all_reduce|two_shot_all_reduce|cross_device_reduce_)")


def own_name(name):
    s = name.strip()
    if s.startswith("void "):
        s = s[len("void "):]
    for anon in ("(anonymous namespace)", "<unnamed>", "{anonymous}"):
        s = s.replace(anon, "")
    s = re.split(r"[<(]", s, maxsplit=1)[0]
    return s.split("::")[-1]


DTYPE = {"Double": 8, "Long": 8, "Float": 4, "Int": 4, "Half": 2, "BFloat16": 2, "Short": 2,
         "Byte": 1, "Char": 1, "Bool": 1}
CPP = {"double": 8, "long": 8, "long int": 8, "int64_t": 8, "float": 4, "int": 4,
       "c10::Half": 2, "c10::BFloat16": 2, "short": 2, "unsigned char": 1, "signed char": 1,
       "char": 1, "bool": 1}
KINDS = [("alltoall", "alltoall"), ("all_to_all", "alltoall"), ("allgather", "allgather"),
         ("all_gather", "allgather"), ("reduce_scatter", "reducescatter"),
         ("reducescatter", "reducescatter"), ("allreduce", "allreduce"),
         ("all_reduce", "allreduce"), ("broadcast", "broadcast"), ("barrier", "barrier")]


def kind_of(name):
    low = name.lower()
    for needle, kind in KINDS:
        if needle in low:
            return kind
    return low


def ns(us):
    # Exact: the number as written (json.load reads floats as Decimal here), µs to whole ns,
    # half away from zero. A float holds an absolute-µs timestamp only to 256 ns.
    return int((Decimal(us) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def merge(spans):
    out = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(spans):
    return sum(e - s for s, e in spans)


def common(a, b):
    # Every pair: quadratic, and plainly right.
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def elements(dims):
    if not isinstance(dims, list) or not dims:
        return None
    if all(isinstance(d, list) for d in dims):
        parts = [elements(d) for d in dims]
        return None if any(p is None for p in parts) else sum(parts)
    n = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def op_bytes(args, send=None):
    # An all-to-all's size is its send side (nccl-tests' alltoall size is the send buffer):
    # `In msg nelems`, else the send tensor, input `send` of the op (0 for record_param_comms
    # and nccl: titles, 1 for c10d::alltoall_base_(output, input, ...)). Other kinds: the
    # larger of input and output.
    size = DTYPE.get(args.get("dtype"))
    inn, out = args.get("In msg nelems"), args.get("Out msg nelems")
    if send is not None and size and inn:
        return inn * size
    if send is None and size and (inn or out):
        return max(inn or 0, out or 0) * size
    # Shapes of zero elements ([[0],[0]]: nothing to send) are 0 bytes, not unknown.
    sizes = [elements(d) * CPP[t] if elements(d) is not None and CPP.get(t) else None
             for d, t in zip(args.get("Input Dims") or [], args.get("Input type") or [])]
    if send is not None:
        return sizes[send] if send < len(sizes) else None
    known = [b for b in sizes if b is not None]
    return max(known) if known else None


def main(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e and "dur" in e]
    steps = sorted((int(m.group(1)), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
                   for e in events
                   for m in [re.match(r"^ProfilerStep#(\d+)$", e.get("name", ""))]
                   if m and e.get("cat") in ("cpu_op", "user_annotation"))
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["dur"] >= 0]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in e.get("args", {})]
    ops = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation") and (
        e["name"] == "record_param_comms" or e["name"].startswith("nccl:")
        or (e["name"].startswith("c10d::") and "wait" not in e["name"]))]

    # Outermost collective ops: not inside another on the same thread.
    def inside(a, b):
        return a is not b and a["tid"] == b["tid"] and ns(b["ts"]) <= ns(a["ts"]) and \
            ns(a["ts"]) + ns(a["dur"]) <= ns(b["ts"]) + ns(b["dur"])
    outer = [o for o in ops if not any(inside(o, p) for p in ops)]
    # Spans that wait for a collective: `wait` in the name, not a collective op themselves. A
    # group that names no collective (no `Collective name`, no c10d op, no nccl: title) inside
    # one is the wait's record_param_comms, not a collective.
    waits = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")
             and "wait" in e["name"].lower() and e["name"] != "record_param_comms"
             and not e["name"].startswith("nccl:") and not re.match(r"^ProfilerStep#\d+$", e["name"])]

    def in_wait(o):
        return any(w["tid"] == o["tid"] and ns(w["ts"]) <= ns(o["ts"]) and
                   ns(o["ts"]) + ns(o["dur"]) <= ns(w["ts"]) + ns(w["dur"]) for w in waits)
    colls = []
    launched_by = {}
    for o in outer:
        members = [o] + [p for p in ops if inside(p, o)]
        rpcs = [p for p in members if p["name"] == "record_param_comms"]
        kind = next((kind_of(p["args"]["Collective name"]) for p in rpcs if "Collective name" in p.get("args", {})), None)
        named = kind or any(not p["name"] == "record_param_comms" for p in members)
        if not named and in_wait(o):
            continue
        kind = kind or kind_of(o["name"])
        a2a = kind == "alltoall"
        sizes = [op_bytes(p.get("args", {}), 0 if a2a else None) for p in rpcs]
        c10d = [b for p in members if p["name"].startswith("c10d::")
                for b in [op_bytes(p.get("args", {}), 1 if a2a else None)] if b is not None]
        # A nested nccl: title records the send buffer: an all-gather's message is that
        # times its group.
        title = [b for p in members if p["name"].startswith("nccl:")
                 for b in [op_bytes(p.get("args", {}), 0 if a2a else None)] if b is not None]
        group = next((p["args"]["Group size"] for p in members if "Group size" in p.get("args", {})),
                     (doc.get("distributedInfo") or {}).get("world_size"))
        if rpcs and all(s is not None for s in sizes):
            nbytes = sum(sizes)
        elif c10d:
            nbytes = c10d[0]
        elif title:
            nbytes = title[0] * group if kind == "allgather" and group else (None if kind == "allgather" else title[0])
        else:
            nbytes = None
        if kind == "wait":
            continue
        c = {"kind": kind, "bytes": nbytes, "start": ns(o["ts"]), "spans": []}
        colls.append(c)
        lo, hi = ns(o["ts"]), ns(o["ts"]) + ns(o["dur"])
        for l in launches:
            if l["tid"] == o["tid"] and lo <= ns(l["ts"]) <= hi:
                launched_by[l["args"]["correlation"]] = c
    launch_ts = {l["args"]["correlation"]: ns(l["ts"]) for l in launches}

    def step_of(t):
        for number, s, e in steps:
            if s <= t < e:
                return number
        return None

    per = {n: {"all": [], "comm": [], "compute": []} for n, _, _ in steps} if steps else {None: {"all": [], "comm": [], "compute": []}}
    compute_all = []
    whole = {"all": [], "comm": [], "compute": []}
    for g in gpu:
        a = g.get("args", {})
        span = (ns(g["ts"]), ns(g["ts"]) + ns(g["dur"]))
        c = launched_by.get(a.get("correlation"))
        name = g["name"]
        is_comm = c is not None or bool(COMM.match(name)) or bool(SYMM.match(own_name(name)))
        if c is None and COMM.match(name) and "Collective name" in a:
            k = kind_of(a["Collective name"])
            c = {"kind": k, "bytes": op_bytes(a, 0 if k == "alltoall" else None), "start": span[0], "spans": []}
            colls.append(c)
        if c is not None:
            c["spans"].append(span)
        compute = not is_comm and not MEMORY.match(name) and not NOT_COMPUTE.match(name)
        if compute:
            compute_all.append(span)
        at = launch_ts.get(a.get("correlation"), span[0])
        key = step_of(at) if steps else None
        if key is None and steps:
            continue
        if steps:
            # Cut at the end of the step that launched it.
            end = next(e for n, _, e in steps if n == key)
            span = (span[0], min(span[1], end))
        whole["all"].append(span)
        if is_comm:
            whole["comm"].append(span)
        if compute:
            whole["compute"].append(span)
        per[key]["all"].append(span)
        if is_comm:
            per[key]["comm"].append(span)
        if compute:
            per[key]["compute"].append(span)
    compute_all = merge(compute_all)
    lo = min((ns(g["ts"]) for g in gpu), default=0)
    hi = max((ns(g["ts"]) + ns(g["dur"]) for g in gpu), default=0)
    spans = {n: e - s for n, s, e in steps} if steps else {None: hi - lo}
    out_steps = []
    for key, p in per.items():
        comm = merge(p["comm"])
        overlap = common(comm, compute_all)
        out_steps.append({
            "step": key, "step_us": spans[key] / 1000, "gpu_busy_us": length(merge(p["all"])) / 1000,
            "compute_us": length(merge(p["compute"])) / 1000, "comm_us": length(comm) / 1000,
            "overlap_us": overlap / 1000, "exposed_us": (length(comm) - overlap) / 1000,
        })
    # The whole rank: one union of every step's (cut) work, never a sum of the steps'.
    comm = merge(whole["comm"])
    overlap = common(comm, compute_all)
    overall = {"gpu_busy_us": length(merge(whole["all"])) / 1000, "compute_us": length(merge(whole["compute"])) / 1000,
               "comm_us": length(comm) / 1000, "overlap_us": overlap / 1000, "exposed_us": (length(comm) - overlap) / 1000}
    kinds = {}
    for c in colls:
        k = kinds.setdefault(c["kind"], {"count": 0, "bytes": 0, "unknown": 0, "small": 0, "gpu_us": 0.0})
        k["count"] += 1
        k["gpu_us"] += length(merge(c["spans"])) / 1000
        if c["bytes"] is None:
            k["unknown"] += 1
        else:
            k["bytes"] += c["bytes"]
            k["small"] += c["bytes"] < (1 << 20)
    print(json.dumps({"rank": (doc.get("distributedInfo") or {}).get("rank"), "steps": out_steps, "overall": overall, "kinds": kinds}))


if __name__ == "__main__":
    main(sys.argv[1])
