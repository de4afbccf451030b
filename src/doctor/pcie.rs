//! `pcie-link`, `acs` and `iommu`: a GPU or NIC link trained below its maximum, and what makes
//! GPU–NIC traffic climb to the root complex. ACS's
//! P2P Request/Completion Redirect on a PCIe switch port above a GPU or NIC sends every
//! GPUDirect transfer up through the CPU instead of across the switch (NCCL's troubleshooting
//! guide; NVIDIA/nccl#606, #2079); an IOMMU translating DMA adds a lookup to each transfer
//! (the guide: `iommu=pt` on bare metal). Both are the hypervisor's on a VM, and are skipped
//! there, said so.

use super::facts::{few, Facts};
use super::finding::{Finding, Status};
use crate::model::snapshot::NoteLevel;
use crate::model::snapshot::{BridgeRole, PciParent, PciPlacement};
use crate::model::Bdf;
use std::collections::BTreeSet;

/// The PCIe extended configuration space: 4096 bytes, the first extended capability at 0x100
/// (PCIe Base Specification §7.6; Linux `include/uapi/linux/pci_regs.h`).
const CONFIG_BYTES: u64 = 4096;
const EXT_CAP_START: usize = 0x100;
/// `PCI_EXT_CAP_ID_ACS`, and its control register's offset and redirect bits
/// (`PCI_ACS_CTRL`, `PCI_ACS_RR`, `PCI_ACS_CR`).
const ACS_CAP_ID: u16 = 0x000d;
const ACS_CTRL: usize = 6;
const ACS_RR: u16 = 0x04;
const ACS_CR: u16 = 0x08;
/// More extended capabilities than fit in the space means a loop in a damaged chain.
const MAX_EXT_CAPS: usize = (CONFIG_BYTES as usize - EXT_CAP_START) / 4;

const ACS_FIX: &str = "turn ACS redirect off on the switch ports (for each: setpci -s <bdf> ECAP_ACS+0x6.w=0000, at every boot, e.g. from a systemd unit), or in the BIOS (PCIe ACS / \"ACS control\" off); keep it on only where a VM's isolation needs it";

/// The GPUs and RDMA NICs: the endpoints of GPUDirect traffic.
fn endpoints<'a>(f: &'a Facts) -> Vec<&'a PciPlacement> {
    let gpus = f.snap.gpus.iter().map(|g| &g.placement);
    let nics = f.snap.matrix_nics().filter_map(|n| n.pci.as_ref());
    gpus.chain(nics).collect()
}

/// The PCIe switch ports on the way from each endpoint up to its root port.
fn switch_ports_above(f: &Facts) -> BTreeSet<Bdf> {
    let bridges = &f.snap.pci.bridges;
    let mut ports = BTreeSet::new();
    for e in endpoints(f) {
        let mut parent = &e.parent;
        // A bridge chain is at most as long as there are bridges (a damaged one loops).
        for _ in 0..=bridges.len() {
            let PciParent::Bridge(bdf) = parent else { break };
            let Some(b) = bridges.iter().find(|b| b.bdf == *bdf) else {
                break;
            };
            if matches!(b.role, BridgeRole::SwitchDownstream | BridgeRole::SwitchUpstream) {
                ports.insert(b.bdf);
            }
            parent = &b.parent;
        }
    }
    ports
}

/// What one port's ACS control says, read from its configuration space.
#[derive(Debug, PartialEq, Eq)]
enum Acs {
    /// No ACS capability: nothing to redirect.
    Absent,
    /// The control register.
    Control(u16),
    /// The space could not be read whole (not root), or its chain is damaged.
    Unknown(String),
}

/// Find ACS in the extended capability chain of a configuration space image.
fn acs_of(config: &[u8]) -> Acs {
    if config.len() < CONFIG_BYTES as usize {
        return Acs::Unknown(format!(
            "{} of 4096 bytes of configuration space readable (the extended space needs root)",
            config.len()
        ));
    }
    let word = |at: usize| -> Option<u32> { Some(u32::from_le_bytes(config.get(at..at + 4)?.try_into().ok()?)) };
    let mut at = EXT_CAP_START;
    for _ in 0..MAX_EXT_CAPS {
        let Some(header) = word(at) else {
            return Acs::Unknown(format!("extended capability at 0x{at:x} lies outside the space"));
        };
        // An all-zero or all-one first header: no extended capabilities (or no device).
        if header == 0 || header == u32::MAX {
            return Acs::Absent;
        }
        let id = (header & 0xffff) as u16;
        let next = (header >> 20) as usize;
        if id == ACS_CAP_ID {
            return match config.get(at + ACS_CTRL..at + ACS_CTRL + 2) {
                Some(c) => Acs::Control(u16::from_le_bytes([c[0], c[1]])),
                None => Acs::Unknown("ACS capability cut off at the end of the space".into()),
            };
        }
        if next == 0 {
            return Acs::Absent;
        }
        if next < EXT_CAP_START || !next.is_multiple_of(4) {
            return Acs::Unknown(format!("extended capability chain points to 0x{next:x}: damaged"));
        }
        at = next;
    }
    Acs::Unknown("extended capability chain loops".into())
}

fn read_acs(f: &Facts, bdf: &Bdf) -> Acs {
    let path = format!("/sys/bus/pci/devices/{bdf}/config");
    match f.fs.read_bytes(&path, CONFIG_BYTES) {
        Ok(bytes) => acs_of(&bytes),
        Err(e) => Acs::Unknown(format!("{path}: {e}")),
    }
}

/// Every GPU and RDMA NIC link at its maximum width and speed (the probe notes the others).
pub(super) fn pcie_link(f: &Facts) -> Option<Finding> {
    let degraded: Vec<&crate::model::Note> = f.snap.notes.iter().filter(|n| n.code == "pcie-degraded").collect();
    if degraded.is_empty() {
        return Some(Finding::pass("every GPU and RDMA NIC link runs at its maximum"));
    }
    let worst = if degraded.iter().any(|n| n.level == NoteLevel::Warn) {
        Status::Fail
    } else {
        Status::Warn
    };
    Some(
        Finding::new(
            worst,
            degraded
                .iter()
                .map(|n| n.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
        )
        .fix("reseat the card or check the slot/riser and BIOS link settings"),
    )
}

pub(super) fn acs(f: &Facts) -> Option<Finding> {
    let skip = |why: String| Some(Finding::skip(why));
    if f.vm {
        return skip(
            "a virtual machine (the CPU's hypervisor flag): ACS and ATS are the hypervisor's to set, not this guest's"
                .into(),
        );
    }
    if f.snap.gpus.is_empty() {
        return skip("no GPU".into());
    }
    let ports = switch_ports_above(f);
    if ports.is_empty() {
        return Some(if f.snap.pci.switches_visible {
            Finding::pass("no PCIe switch between the GPUs and NICs and their root ports")
        } else {
            Finding::skip("no PCIe switch visible above the GPUs and NICs")
        });
    }
    let mut redirecting = Vec::new();
    let mut unknown = Vec::new();
    let mut clear = 0;
    for bdf in &ports {
        match read_acs(f, bdf) {
            Acs::Control(c) if c & (ACS_RR | ACS_CR) != 0 => {
                let bits: Vec<&str> = [(ACS_RR, "ReqRedir+"), (ACS_CR, "CmpltRedir+")]
                    .into_iter()
                    .filter(|(b, _)| c & b != 0)
                    .map(|(_, n)| n)
                    .collect();
                redirecting.push(format!("{bdf} ({}, control 0x{c:04x})", bits.join(" ")));
            }
            Acs::Control(_) | Acs::Absent => clear += 1,
            Acs::Unknown(why) => unknown.push(format!("{bdf}: {why}")),
        }
    }
    if !redirecting.is_empty() {
        return Some(Finding::fail(format!(
                "ACS redirect on {} of {} PCIe switch port(s) above the GPUs and NICs, so GPUDirect traffic detours through the root complex: {}{}",
                redirecting.len(),
                ports.len(),
                redirecting.join(", "),
                tail(&unknown)
            ), ACS_FIX));
    }
    if clear == 0 {
        return skip(format!("ACS unknown on every switch port: {}", unknown.join("; ")));
    }
    Some(if unknown.is_empty() {
        Finding::pass(format!(
            "ACS redirect off on all {clear} PCIe switch port(s) above the GPUs and NICs"
        ))
    } else {
        Finding::warn(
            format!(
                "ACS redirect off on {clear} switch port(s), unknown on {}: {}",
                unknown.len(),
                unknown.join("; ")
            ),
            "run doctor as root (the extended configuration space needs it)",
        )
    })
}

fn tail(unknown: &[String]) -> String {
    if unknown.is_empty() {
        String::new()
    } else {
        format!(" (unknown on {})", unknown.join("; "))
    }
}

/// What the kernel command line says of the IOMMU.
fn cmdline_mode(cmdline: &str) -> Option<&'static str> {
    cmdline.split_whitespace().find_map(|w| match w {
        "iommu=pt" | "iommu.passthrough=1" => Some("passthrough"),
        "iommu=off" | "intel_iommu=off" | "amd_iommu=off" => Some("off"),
        _ => None,
    })
}

pub(super) fn iommu(f: &Facts) -> Option<Finding> {
    let skip = |why: &str| Some(Finding::skip(why));
    if f.vm {
        return skip("a virtual machine: the IOMMU on the GPU–NIC path is the hypervisor's");
    }
    let rdma = f.snap.matrix_nics().any(|n| n.pci.is_some());
    if f.snap.gpus.is_empty() || !rdma {
        return skip("no GPU with an RDMA NIC: no GPUDirect path for the IOMMU to sit on");
    }
    let iommus = f.fs.list("/sys/class/iommu");
    let cmdline = f.fs.read("/proc/cmdline").unwrap_or_default();
    if iommus.is_empty() {
        return Some(Finding::pass("no IOMMU active (/sys/class/iommu is empty)"));
    }
    let translated: Vec<String> = endpoints(f)
        .iter()
        .filter_map(|e| {
            let t =
                f.fs.read_trimmed(&format!("/sys/bus/pci/devices/{}/iommu_group/type", e.bdf))?;
            matches!(t.as_str(), "DMA" | "DMA-FQ").then(|| format!("{} ({t})", e.bdf))
        })
        .collect();
    let mode = cmdline_mode(&cmdline);
    let fix = "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, reboot): DMA passes through untranslated, isolation stays for VMs";
    Some(if !translated.is_empty() {
        Finding::warn(format!(
                "the IOMMU translates DMA for {} GPU(s) and NIC(s), so every GPUDirect transfer pays a translation (iommu_group/type): {}",
                translated.len(),
                few(&translated)
            ), fix)
    } else if mode.is_some()
        || endpoints(f)
            .iter()
            .any(|e| f.fs.exists(&format!("/sys/bus/pci/devices/{}/iommu_group/type", e.bdf)))
    {
        Finding::pass(format!(
            "IOMMU ({}) in {} mode on the GPU–NIC path",
            iommus.join(", "),
            mode.unwrap_or("identity")
        ))
    } else {
        Finding::warn(format!("IOMMU active ({}) and /proc/cmdline has no iommu=pt: DMA is likely translated (the devices' iommu_group/type is unreadable)", iommus.join(", ")), fix)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A switch port's space as `lspci -xxxx` shows one: AER at 0x100, then ACS at 0x148.
    fn space(acs_control: Option<u16>) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        let aer_next = if acs_control.is_some() { 0x148u32 } else { 0 };
        c[0x100..0x104].copy_from_slice(&(0x0001 | (1 << 16) | (aer_next << 20)).to_le_bytes());
        if let Some(ctrl) = acs_control {
            c[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
            c[0x14c..0x14e].copy_from_slice(&0x005fu16.to_le_bytes());
            c[0x14e..0x150].copy_from_slice(&ctrl.to_le_bytes());
        }
        c
    }

    #[test]
    fn acs_is_found_in_the_chain_and_damage_is_named() {
        assert_eq!(acs_of(&space(Some(0x001d))), Acs::Control(0x001d));
        assert_eq!(acs_of(&space(Some(0))), Acs::Control(0));
        assert_eq!(acs_of(&space(None)), Acs::Absent);
        assert!(matches!(acs_of(&space(Some(0))[..64]), Acs::Unknown(w) if w.contains("64 of 4096")));
        let mut looped = space(None);
        looped[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
        assert!(matches!(acs_of(&looped), Acs::Unknown(w) if w.contains("loops")));
        let mut wild = space(None);
        wild[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x42 << 20)).to_le_bytes());
        assert!(matches!(acs_of(&wild), Acs::Unknown(w) if w.contains("damaged")));
        assert_eq!(acs_of(&[0xff; 4096]), Acs::Absent);
    }

    #[test]
    fn the_command_line_modes() {
        assert_eq!(
            cmdline_mode("BOOT_IMAGE=/vmlinuz ro quiet iommu=pt"),
            Some("passthrough")
        );
        assert_eq!(cmdline_mode("intel_iommu=on iommu.passthrough=1"), Some("passthrough"));
        assert_eq!(cmdline_mode("amd_iommu=off"), Some("off"));
        assert_eq!(cmdline_mode("intel_iommu=on"), None);
    }
}
