#!/usr/bin/env python3
"""An independent reading of an ibnetdiscover capture, for topo-tune's `fabric` to be held
against: switch and host-port counts from the switch blocks, and, for the NDR SuperPOD plane,
each leaf's rail and scalable unit from its *name* (`…-IBLEAF-RR-SS`) — what topo-tune derives
from the cabling alone. Prints JSON.

    python3 check_fabric.py CAPTURE
"""
import json
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
switch = None
switches = {}
host_ports = 0
unset = 0
for line in text.splitlines():
    m = re.match(r'^Switch\s+\d+\s+"(S-[0-9a-f]+)"\s+#\s+"([^"]*)"', line)
    if m:
        desc = m.group(2)
        name = desc.split(";", 1)[-1].split(":", 1)[0]
        switch = name
        switches[name] = {"hosts": 0}
        continue
    if line.startswith("Ca") or line.startswith("vendid"):
        switch = None
        continue
    m = re.match(r'^\[\d+\]\s+"(H-[0-9a-f]+)"\[\d+\]\S*\s+#\s+"([^"]*)"', line)
    if m and switch is not None:
        desc = m.group(2)
        if "Aggregation Node" in desc:
            continue
        host_ports += 1
        switches[switch]["hosts"] += 1
        if desc.startswith("MT") or desc.split()[0] in ("localhost", "ubuntu"):
            unset += 1

leaves = {}
for name in switches:
    m = re.search(r"IBLEAF-(\d+)-(\d+)$", name)
    if m:
        leaves[name] = {"rail": int(m.group(1)), "su": int(m.group(2))}
out = {
    "switches": len(switches),
    "switches_with_hosts": sum(1 for s in switches.values() if s["hosts"] > 0),
    "host_ports": host_ports,
    "unnamed_ports": unset,
    "leaves_by_name": leaves,
}
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
