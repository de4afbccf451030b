#!/usr/bin/env python3
"""Compare `topo-tune probe` with nvidia-smi on a GPU machine, field by field.

Usage: check-against-nvidia-smi.py [path/to/topo-tune]
Runs `nvidia-smi -q -x`, `nvidia-smi topo -m` and `topo-tune probe --output json`, then checks,
for every GPU: bus id, name, UUID, PCIe generation and width (current and max), CPU affinity
and NUMA affinity, and the path class of every GPU pair. Prints one line per check and exits 1 on any mismatch.
"""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

tool = sys.argv[1] if len(sys.argv) > 1 else "topo-tune"
smi = ET.fromstring(subprocess.run(["nvidia-smi", "-q", "-x"], check=True, capture_output=True, text=True).stdout)
topo = subprocess.run(["nvidia-smi", "topo", "-m"], check=True, capture_output=True, text=True).stdout
snap = json.loads(subprocess.run([tool, "probe", "--output", "json", "--matrix"], check=True, capture_output=True, text=True).stdout)

# nvidia-smi topo -m: strip ANSI, split on tabs; header names the columns.
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in topo.splitlines()]
header = [c.strip() for c in lines[0].split("\t")]
rows = {}
for l in lines[1:]:
    cells = [c.strip() for c in l.split("\t")]
    if cells and re.fullmatch(r"GPU\d+", cells[0]):
        rows[cells[0]] = dict(zip(header, cells))

failures = 0
def check(what, ours, theirs):
    global failures
    ok = str(ours) == str(theirs)
    failures += 0 if ok else 1
    print(f"{'ok  ' if ok else 'FAIL'} {what}: topo-tune={ours!r} nvidia-smi={theirs!r}")

def norm_bus(b):
    d, rest = b.lower().split(":", 1)
    return f"{int(d, 16):04x}:{rest}"

gpus = {g["bdf"]: g for g in snap["gpus"]}
check("GPU count", len(snap["gpus"]), len(smi.findall("gpu")))
for i, g in enumerate(smi.findall("gpu")):
    bus = norm_bus(g.findtext("pci/pci_bus_id"))
    ours = gpus.get(bus)
    check(f"GPU{i} bus id present", ours is not None, True)
    if ours is None:
        continue
    pcie = ours["pcie"]
    check(f"GPU{i} name", ours["name"], g.findtext("product_name"))
    check(f"GPU{i} uuid", ours["uuid"], g.findtext("uuid"))
    check(f"GPU{i} pcie current gen", pcie["current_gen"], g.findtext("pci/pci_gpu_link_info/pcie_gen/current_link_gen"))
    check(f"GPU{i} pcie max gen", pcie["max_gen"], g.findtext("pci/pci_gpu_link_info/pcie_gen/max_link_gen"))
    check(f"GPU{i} pcie current width", f"{pcie['current_width']}x", g.findtext("pci/pci_gpu_link_info/link_widths/current_link_width"))
    check(f"GPU{i} pcie max width", f"{pcie['max_width']}x", g.findtext("pci/pci_gpu_link_info/link_widths/max_link_width"))
    row = rows.get(f"GPU{ours['index']}", {})
    check(f"GPU{i} CPU affinity", ours["cpu_affinity"], row.get("CPU Affinity"))
    numa = ",".join(str(n) for n in ours["numa_affinity"]) or "N/A"
    check(f"GPU{i} NUMA affinity", numa, row.get("NUMA Affinity"))
# Path classes: every GPU row, every GPU column (NIC columns when the NIC legends agree).
legend = dict(re.findall(r"^\s*(NIC\d+): (\S+)", "\n".join(lines), re.M))
m = snap["matrix"]
labels = [d["label"] for d in m["devices"]]
ours_names = {d["label"]: d["name"] for d in m["devices"]}
for i, a in enumerate(labels):
    if a not in rows:
        continue
    for j, b in enumerate(labels):
        if b.startswith("NIC") and legend.get(b) != ours_names[b]:
            continue
        if b in rows[a]:
            check(f"{a}->{b} path class", m["classes"][i][j], rows[a][b])
print(f"{failures} mismatch(es)")
sys.exit(1 if failures else 0)
