#!/usr/bin/env python3
"""Write a minimal hwloc 2.x XML export shaped like an HGX-2 server (16 V100 SXM3 GPUs and 12
NVSwitches on PCIe, two sockets), as `lstopo --whole-io --of xml` lays such a machine out
without an NVIDIA driver (no NVLink facts). Synthetic: made for topo-tune's tests, not taken
from a machine. PCI ids from pci.ids: 10de:1db8 "GV100GL [Tesla V100 SXM3 32GB]",
10de:1ac2 "NVSwitch", 10b5:9797 "PEX 8797", 15b3:1017 "MT27800 Family [ConnectX-5]".

    scripts/make-hgx2-hwloc.py > tests/data/nccl-shapes/hgx2-v100-sxm3.hwloc.xml
"""

def mask(first, count):
    return "0x%08x" % (((1 << count) - 1) << first)

gp = [100]
def gpi():
    gp[0] += 1
    return gp[0]

def io(pkg):
    """One baseboard's PCI tree, as I/O children of its Package (hwloc 2.x)."""
    base = 0x10 if pkg == 0 else 0x90
    # 8 GPUs, 6 NVSwitches and one ConnectX per baseboard, one PCIe switch port each.
    devices = [("0302", "10de:1db8", "10de:12ab") for _ in range(8)]
    devices += [("0680", "10de:1ac2", "10de:1679") for _ in range(6)]
    devices += [("0207", "15b3:1017", "15b3:0008")]
    last = base + 1 + len(devices)
    w(f'      <object type="Bridge" gp_index="{gpi()}" bridge_type="0-1" depth="0" bridge_pci="0000:[{base:02x}-{last:02x}]">')
    w(f'        <object type="Bridge" gp_index="{gpi()}" bridge_type="1-1" depth="1" bridge_pci="0000:[{base + 1:02x}-{last:02x}]" pci_busid="0000:{base:02x}:00.0" pci_type="0604 [10b5:9797] [0000:0000] ca" pci_link_speed="15.753846">')
    for i, (cls, vid, sub) in enumerate(devices):
        bus = base + 2 + i
        w(f'        <object type="Bridge" gp_index="{gpi()}" bridge_type="1-1" depth="2" bridge_pci="0000:[{bus:02x}-{bus:02x}]" pci_busid="0000:{base + 1:02x}:{i:02x}.0" pci_type="0604 [10b5:9797] [0000:0000] ca" pci_link_speed="15.753846">')
        w(f'          <object type="PCIDev" gp_index="{gpi()}" pci_busid="0000:{bus:02x}:00.0" pci_type="{cls} [{vid}] [{sub}] a1" pci_link_speed="15.753846">')
        if cls == "0207":
            w(f'            <object type="OSDev" gp_index="{gpi()}" name="mlx5_{pkg}" osdev_type="3">')
            w('              <info name="Port1State" value="4"/>')
            w('              <info name="Port1LID" value="0x1"/>')
            w('            </object>')
        w('          </object>')
        w('        </object>')
    w('      </object>')
    w('    </object>')


out = []
w = out.append
w('<?xml version="1.0" encoding="UTF-8"?>')
w('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
w('<topology version="2.0">')
full = mask(0, 16)
w(f'  <object type="Machine" os_index="0" cpuset="{full}" complete_cpuset="{full}" allowed_cpuset="{full}" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">')
w('    <info name="Architecture" value="x86_64"/>')
w('    <info name="HostName" value="hgx2-synthetic"/>')
for pkg in range(2):
    cs = mask(pkg * 8, 8)
    ns = "0x%08x" % (1 << pkg)
    w(f'    <object type="Package" os_index="{pkg}" cpuset="{cs}" complete_cpuset="{cs}" nodeset="{ns}" complete_nodeset="{ns}" gp_index="{gpi()}">')
    w('      <info name="CPUVendor" value="GenuineIntel"/>')
    w(f'      <object type="NUMANode" os_index="{pkg}" cpuset="{cs}" complete_cpuset="{cs}" nodeset="{ns}" complete_nodeset="{ns}" gp_index="{gpi()}" local_memory="1000000000"/>')
    for core in range(8):
        cpu = pkg * 8 + core
        m = mask(cpu, 1)
        w(f'      <object type="Core" os_index="{core}" cpuset="{m}" complete_cpuset="{m}" nodeset="{ns}" complete_nodeset="{ns}" gp_index="{gpi()}">')
        w(f'        <object type="PU" os_index="{cpu}" cpuset="{m}" complete_cpuset="{m}" nodeset="{ns}" complete_nodeset="{ns}" gp_index="{gpi()}"/>')
        w('      </object>')
    io(pkg)
    w('    </object>')
w('  </object>')
w('</topology>')
print("\n".join(out))
