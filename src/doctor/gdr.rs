//! `gdr`: GPUDirect RDMA, as NCCL finds it (src/transport/net_ib/gdr.cc): a peer-memory
//! module — `/sys/kernel/mm/memory_peers/nv_mem/version`, `…/nv_mem_nc/version`, or (NCCL ≥
//! 2.23) `/sys/module/nvidia_peermem/version` — else DMA-BUF, which needs a kernel ≥ 5.12, the
//! driver's open kernel module and NCCL ≥ 2.19 with `NCCL_DMABUF_ENABLE` not 0. Without either,
//! NCCL stages every message through host memory (180 → 10 GB/s: NVIDIA/nccl#1537).

use super::facts::{few, gpu_nics, Facts, Reach};
use super::finding::Finding;
use crate::model::NcclVersion;

const NV_MEM: &str = "/sys/kernel/mm/memory_peers/nv_mem/version";
const NV_MEM_NC: &str = "/sys/kernel/mm/memory_peers/nv_mem_nc/version";
const PEERMEM: &str = "/sys/module/nvidia_peermem/version";

/// The first NCCL that looks for `/sys/module/nvidia_peermem` (v2.23.4; v2.22.3 checks only
/// the two `memory_peers` paths).
const PEERMEM_SEEN_SINCE: NcclVersion = NcclVersion(2, 23, 0);
/// DMA-BUF in NCCL, and in the kernel.
const DMABUF_NCCL: NcclVersion = NcclVersion(2, 19, 0);
const DMABUF_KERNEL: (u32, u32) = (5, 12);

const FIX: &str = "load nvidia_peermem (modprobe nvidia_peermem, and list it in /etc/modules-load.d/ so it comes back after a reboot), or use the driver's open kernel module on a kernel ≥ 5.12 for DMA-BUF";

pub(super) fn gdr(f: &Facts) -> Option<Finding> {
    let skip = |why: &str| Some(Finding::skip(why));
    if f.snap.gpus.is_empty() {
        return skip("no GPU");
    }
    let nics = gpu_nics(f, Reach::Gdr);
    if nics.is_empty() {
        return skip(
            "no RDMA NIC within PXB of a GPU: NCCL uses GPUDirect RDMA only that close by default (NCCL_NET_GDR_LEVEL)",
        );
    }
    let names: Vec<String> = nics.iter().map(|n| n.name.clone()).collect();
    let names = format!("{} RDMA NIC(s) ({})", names.len(), few(&names));
    let version = f.nccl;
    let legacy = [NV_MEM, NV_MEM_NC].into_iter().find(|p| f.fs.exists(p));
    let peermem = f.fs.read_trimmed(PEERMEM);
    let dmabuf = dmabuf(f);
    if let Some(p) = legacy {
        return Some(Finding::pass(format!("peer memory module loaded ({p}) for {}", names)));
    }
    if let Some(v) = &peermem {
        let old = version.filter(|n| *n < PEERMEM_SEEN_SINCE);
        return Some(match (old, &dmabuf) {
            (None, _) => Finding::pass(format!("nvidia_peermem {v} loaded: GPUDirect RDMA for {}", names)),
            (Some(n), Ok(how)) => Finding::warn(format!("nvidia_peermem {v} is loaded, but NCCL {n} does not look for it (only NCCL ≥ 2.23 does), so it uses DMA-BUF instead ({how})"), "upgrade NCCL to 2.23 or later to use nvidia_peermem"),
            (Some(n), Err(why)) => Finding::warn(format!("nvidia_peermem {v} is loaded, but NCCL {n} does not look for it (only NCCL ≥ 2.23 does), and DMA-BUF is out ({why}): GPUDirect RDMA off"), "upgrade NCCL to 2.23 or later"),
        });
    }
    Some(match dmabuf {
        Ok(how) => Finding::pass(format!("no peer memory module, DMA-BUF instead: {how}")),
        Err(why) => Finding::fail(format!(
                "GPUDirect RDMA off for {}: no peer memory module ({NV_MEM}, {PEERMEM} absent) and no DMA-BUF ({why}), so NCCL stages every transfer through host memory",
                names
            ), FIX),
    })
}

/// Why DMA-BUF cannot carry GPUDirect RDMA on this node.
#[derive(Debug, thiserror::Error)]
enum NoDmabuf {
    #[error("kernel {0} is older than 5.12")]
    OldKernel(String),
    #[error("the kernel release is unknown")]
    UnknownKernel,
    #[error("/proc/driver/nvidia/version is unreadable: the driver's kernel module is unknown")]
    UnknownModule,
    #[error("the driver's proprietary kernel module (DMA-BUF needs the open one)")]
    ProprietaryModule,
    #[error("NCCL {0} predates DMA-BUF (2.19)")]
    OldNccl(NcclVersion),
    #[error("{file}:{line} sets NCCL_DMABUF_ENABLE=0")]
    Disabled { file: String, line: usize },
}

/// Whether DMA-BUF can carry GPUDirect RDMA here: how, or why not.
fn dmabuf(f: &Facts) -> Result<String, NoDmabuf> {
    let kernel =
        f.fs.read_trimmed("/proc/sys/kernel/osrelease")
            .or_else(|| f.snap.machine.kernel.clone());
    match kernel.as_deref().and_then(kernel_version) {
        Some(v) if v < DMABUF_KERNEL => return Err(NoDmabuf::OldKernel(kernel.unwrap_or_default())),
        None => return Err(NoDmabuf::UnknownKernel),
        Some(_) => {}
    }
    match f.fs.read("/proc/driver/nvidia/version").as_deref() {
        None => return Err(NoDmabuf::UnknownModule),
        Some(d) if !d.contains("Open Kernel Module") => return Err(NoDmabuf::ProprietaryModule),
        Some(_) => {}
    }
    if let Some(v) = f.nccl.filter(|v| *v < DMABUF_NCCL) {
        return Err(NoDmabuf::OldNccl(v));
    }
    if let Some(s) = f
        .settings
        .first("NCCL_DMABUF_ENABLE")
        .filter(|s| s.reading() == crate::nccl::reads::Reading::Int(0))
    {
        return Err(NoDmabuf::Disabled {
            file: s.file.clone(),
            line: s.line,
        });
    }
    Ok(format!(
        "kernel {}, the open kernel module{}",
        kernel.unwrap_or_default(),
        f.nccl.map(|v| format!(", NCCL {v}")).unwrap_or_default()
    ))
}

/// `6.8.0-51-generic` → (6, 8).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_as_uname_writes_them() {
        assert_eq!(kernel_version("6.8.0-51-generic"), Some((6, 8)));
        assert_eq!(kernel_version("5.14.0-611.55.1.2toss.t5.x86_64"), Some((5, 14)));
        assert_eq!(kernel_version("4.18.0"), Some((4, 18)));
        assert!(kernel_version("4.18.0").unwrap() < DMABUF_KERNEL);
        assert_eq!(kernel_version("garbage"), None);
    }
}
