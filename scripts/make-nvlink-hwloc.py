#!/usr/bin/env python3
"""Write minimal hwloc 2.x XML exports for topo-tune's NVLink tests. Synthetic: made for the
tests, laid out as `lstopo --of xml` writes a machine (one socket, one PCIe switch port per
device), not taken from a machine.

  mesh   4 H100 SXM5 (10de:2330 "GH100 [H100 SXM5 80GB]") with their NVML OS devices and the
         `NVLinkBandwidth` matrix hwloc's NVML backend writes for a 4-GPU HGX board: 150000
         MB/s per pair (6 NVLink 4 links at hwloc's 25000 each), 1000000 on the diagonal
         (hwloc/topology-nvml.c); one ConnectX-7 (15b3:1021) with an active port.
  v3     the same machine as an hwloc 3.0 export (`<topology version="3.0">`).
  amd    2 AMD Instinct MI300X (1002:74a1, class 0x1200) and no NVIDIA GPU.

    scripts/make-nvlink-hwloc.py mesh > tests/data/nvlink/hwloc-4xh100-mesh.xml
    scripts/make-nvlink-hwloc.py v3   > tests/data/nvlink/hwloc3-4xh100.xml
    scripts/make-nvlink-hwloc.py amd  > tests/data/nvlink/hwloc-2xmi300x.xml
"""
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "mesh"
gp = [100]
def gpi():
    gp[0] += 1
    return gp[0]

def mask(first, count):
    return "0x%08x" % (((1 << count) - 1) << first)

out = []
w = out.append
w('<?xml version="1.0" encoding="UTF-8"?>')
w('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
w('<topology version="%s">' % ("3.0" if mode == "v3" else "2.0"))
full = mask(0, 8)
w(f'  <object type="Machine" os_index="0" cpuset="{full}" complete_cpuset="{full}" allowed_cpuset="{full}" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">')
w('    <info name="Architecture" value="x86_64"/>')
w(f'    <info name="HostName" value="nvlink-{mode}-synthetic"/>')
w(f'    <object type="Package" os_index="0" cpuset="{full}" complete_cpuset="{full}" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="{gpi()}">')
w('      <info name="CPUVendor" value="GenuineIntel"/>')
w(f'      <object type="NUMANode" os_index="0" cpuset="{full}" complete_cpuset="{full}" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="{gpi()}" local_memory="1000000000"/>')
for cpu in range(8):
    m = mask(cpu, 1)
    w(f'      <object type="Core" os_index="{cpu}" cpuset="{m}" complete_cpuset="{m}" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="{gpi()}">')
    w(f'        <object type="PU" os_index="{cpu}" cpuset="{m}" complete_cpuset="{m}" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="{gpi()}"/>')
    w('      </object>')
if mode == "amd":
    devices = [("1200", "1002:74a1", "1002:74a1", "AMD Instinct MI300X") for _ in range(2)]
else:
    devices = [("0302", "10de:2330", "10de:16c1", "NVIDIA H100 80GB HBM3") for _ in range(4)]
devices.append(("0207", "15b3:1021", "15b3:0041", None))
base = 0x10
last = base + 1 + len(devices)
nvml = []
w(f'      <object type="Bridge" gp_index="{gpi()}" bridge_type="0-1" depth="0" bridge_pci="0000:[{base:02x}-{last:02x}]">')
w(f'        <object type="Bridge" gp_index="{gpi()}" bridge_type="1-1" depth="1" bridge_pci="0000:[{base + 1:02x}-{last:02x}]" pci_busid="0000:{base:02x}:00.0" pci_type="0604 [1000:c030] [0000:0000] b0" pci_link_speed="63.015385">')
for i, (cls, vid, sub, model) in enumerate(devices):
    bus = base + 2 + i
    w(f'          <object type="Bridge" gp_index="{gpi()}" bridge_type="1-1" depth="2" bridge_pci="0000:[{bus:02x}-{bus:02x}]" pci_busid="0000:{base + 1:02x}:{i:02x}.0" pci_type="0604 [1000:c030] [0000:0000] b0" pci_link_speed="63.015385">')
    w(f'            <object type="PCIDev" gp_index="{gpi()}" pci_busid="0000:{bus:02x}:00.0" pci_type="{cls} [{vid}] [{sub}] a1" pci_link_speed="63.015385">')
    if cls == "0207":
        w(f'              <object type="OSDev" gp_index="{gpi()}" name="mlx5_0" osdev_type="3">')
        w('                <info name="Port1State" value="4"/>')
        w('                <info name="Port1LID" value="0x1"/>')
        w('              </object>')
    elif vid.startswith("10de"):
        g = gpi()
        nvml.append(g)
        w(f'              <object type="OSDev" gp_index="{g}" name="nvml{len(nvml) - 1}" subtype="NVML" osdev_type="1">')
        w('                <info name="Backend" value="NVML"/>')
        w(f'                <info name="GPUModel" value="{model}"/>')
        w('              </object>')
    w('            </object>')
    w('          </object>')
w('        </object>')
w('      </object>')
w('    </object>')
w('  </object>')
if nvml:
    n = len(nvml)
    vals = [1000000 if i == j else 150000 for i in range(n) for j in range(n)]
    w(f'  <distances2 type="OSDev" nbobjs="{n}" kind="9" name="NVLinkBandwidth" indexing="gp">')
    idx = " ".join(str(g) for g in nvml) + " "
    w(f'    <indexes length="{len(idx)}">{idx}</indexes>')
    for k in range(0, len(vals), 10):
        chunk = " ".join(str(v) for v in vals[k:k + 10]) + " "
        w(f'    <u64values length="{len(chunk)}">{chunk}</u64values>')
    w('  </distances2>')
w('</topology>')
print("\n".join(out))
