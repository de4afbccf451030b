//! GPU health a node shows without traffic, next to the NCCL killers: Xid errors in the kernel
//! log since boot, memory the GPU can no longer trust (uncorrectable ECC errors, a row remap or
//! page retirement waiting for a reset, a remap that failed), and clocks held down now by the
//! hardware (thermal, power brake, HW slowdown) — what DCGM's health watches and Azure's node
//! health checks look at. One slow or sick GPU sets the pace of every collective it is in.

use super::facts::Facts;
use super::finding::Finding;
use crate::model::snapshot::GpuHealth;
use crate::probe::fsroot::FsRoot;

/// The most of the kernel log scanned (the ring buffer is a few MiB at most; a saved log may
/// be larger: scanned to here, held never).
const SCAN_LIMIT: u64 = 256 << 20;
/// The most records read from `/dev/kmsg`.
const MAX_RECORDS: usize = 200_000;

/// Xids that mean the GPU or its memory or links failed, not the application: NVIDIA's Xid
/// catalog (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket": reset the GPU, drain, or
/// contact support) — 46 GPU stopped processing, 48 double-bit ECC, 61/62 internal
/// micro-controller, 63/64 row remapping event/failure, 74 NVLink error, 79 fallen off the
/// bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP, 140
/// unrecovered ECC. Others (13, 31, 43, 45: the application's faults) warn.
const HARDWARE_XIDS: &[u32] = &[46, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140];

/// One `NVRM: Xid (PCI:0000:2b:00): 79, …` line: the GPU's bus as the driver writes it and
/// the Xid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Xid {
    pub(super) bus: String,
    pub(super) code: u32,
}

/// Every Xid in a kernel log (`dmesg` text or `/dev/kmsg` records), in order.
#[cfg(test)]
pub(super) fn xids(log: &str) -> Vec<Xid> {
    log.lines().filter_map(xid_of).collect()
}

/// The Xid of one kernel log line, if it reports one.
fn xid_of(line: &str) -> Option<Xid> {
    let rest = &line[line.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let (bus, rest) = rest.split_once("): ")?;
    let code = rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
    let bus = bus.strip_prefix("PCI:").unwrap_or(bus);
    let plain = bus.len() <= 16 && bus.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
    plain.then(|| Xid {
        bus: four_digit_domain(&bus.to_ascii_lowercase()),
        code,
    })
}

/// `00000000:2b:00` (NVML's eight-digit domain) as sysfs writes it: `0000:2b:00`.
fn four_digit_domain(bus: &str) -> String {
    match bus.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 && domain[..domain.len() - 4].bytes().all(|b| b == b'0') => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => bus.to_string(),
    }
}

/// The Xids of a kernel log, counted as it is read: per code, how many and on which buses
/// (sets: many distinct buses stay linear), the lines read, and whether the log went on past
/// what was read. Only the counts are held, never the log.
#[derive(Debug, Default)]
struct XidTally {
    by_code: std::collections::BTreeMap<u32, (usize, std::collections::BTreeSet<String>)>,
    lines: usize,
    cut: bool,
}

impl XidTally {
    fn line(&mut self, line: &str) {
        self.lines += 1;
        if let Some(x) = xid_of(line) {
            let e = self.by_code.entry(x.code).or_default();
            e.0 += 1;
            // Bounded: a log naming more buses than a node has GPUs is still counted.
            if e.1.len() < 4096 {
                e.1.insert(x.bus);
            }
        }
    }

    /// A chunk of text; a line cut at the chunk's end is carried into the next.
    fn text(&mut self, carry: &mut String, chunk: &str) {
        carry.push_str(chunk);
        let Some(end) = carry.rfind('\n') else { return };
        let rest = carry.split_off(end + 1);
        for line in carry.lines() {
            self.line(line);
        }
        *carry = rest;
    }
}

/// The kernel log since boot, tallied: `/dev/kmsg` read without blocking on the live machine
/// (each read one record), the file of that name in a described tree, read a chunk at a time
/// to its end (up to `SCAN_LIMIT`; a larger one is tallied as far as that and said to be cut,
/// never refused: a fatal Xid early in it is still a failure).
fn kernel_log(fs: &FsRoot) -> std::io::Result<XidTally> {
    use std::io::Read;
    let mut tally = XidTally::default();
    let mut carry = String::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0u64;
    if !fs.is_live() {
        let mut f = fs.open_regular("/dev/kmsg")?;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            tally.text(&mut carry, &String::from_utf8_lossy(&buf[..n]));
            read += n as u64;
            if read >= SCAN_LIMIT {
                tally.cut = f.read(&mut buf[..1])? > 0;
                break;
            }
        }
    } else {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open("/dev/kmsg")?;
        let mut records = 0;
        loop {
            if records == MAX_RECORDS || read >= SCAN_LIMIT {
                // Cut only if another record is there to read.
                tally.cut = f.read(&mut buf).is_ok_and(|n| n > 0);
                break;
            }
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    records += 1;
                    read += n as u64;
                    tally.text(&mut carry, &String::from_utf8_lossy(&buf[..n]));
                }
                // EPIPE: the record was overwritten while we read; the next one follows.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
    }
    if !carry.is_empty() {
        tally.line(&carry);
    }
    Ok(tally)
}

/// `gpu-xid`: Xid errors since boot, per code and GPU.
pub(super) fn gpu_xid(f: &Facts) -> Option<Finding> {
    if f.snap.gpus.is_empty() {
        return None;
    }
    let tally = match kernel_log(f.fs) {
        Ok(t) => t,
        Err(e) => {
            return Some(Finding::skip(format!(
                "the kernel log cannot be read ({e}): reading /dev/kmsg needs root or kernel.dmesg_restrict=0"
            )))
        }
    };
    let cut = if tally.cut {
        format!("; the log goes on past the {} line(s) read", tally.lines)
    } else {
        String::new()
    };
    if tally.by_code.is_empty() {
        // How much was read: a pass over an empty read would prove nothing, and a pass over
        // a part of the log is no pass.
        let what = format!(
            "no Xid error in the kernel log since boot ({} line(s) read{cut})",
            tally.lines
        );
        return Some(if tally.cut {
            Finding::warn(
                what,
                "read the rest of the log (dmesg | grep Xid) before calling the node clean",
            )
        } else {
            Finding::pass(what)
        });
    }
    let parts: Vec<String> = tally
        .by_code
        .iter()
        .map(|(code, (n, buses))| {
            let gpus: Vec<String> = buses.iter().map(|b| gpu_of(f, b)).collect();
            format!("Xid {code} ×{n} on {}", super::facts::few(&gpus))
        })
        .collect();
    let hardware: Vec<u32> = tally
        .by_code
        .keys()
        .copied()
        .filter(|c| HARDWARE_XIDS.contains(c))
        .collect();
    let detail = format!("{} since boot{cut}", parts.join("; "));
    Some(if hardware.is_empty() {
        Finding::warn(
            detail,
            "application faults (Xid 13, 31, 43, 45 are the job's): check the job that ran; repeated on an idle node, reset the GPU",
        )
    } else {
        Finding::fail(
            detail,
            format!(
                "Xid {} is the GPU's, not the job's (NVIDIA's Xid catalog): drain the node, reset the GPU (nvidia-smi -r) or reboot; again after that, service the GPU",
                hardware.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// `GPU 3 (0000:2b:00.0)` for a bus the driver names `0000:2b:00`, else the bus itself.
fn gpu_of(f: &Facts, bus: &str) -> String {
    f.snap
        .gpus
        .iter()
        .find(|g| g.placement.bdf.to_string().starts_with(bus))
        .map_or_else(|| bus.to_string(), |g| format!("GPU {} ({})", g.index, g.placement.bdf))
}

/// `gpu-memory`: what NVML says of each GPU's memory.
pub(super) fn gpu_memory(f: &Facts) -> Option<Finding> {
    let asked: Vec<(u32, &GpuHealth)> = f
        .snap
        .gpus
        .iter()
        .filter_map(|g| Some((g.index, g.health.as_ref()?)))
        .collect();
    if asked.is_empty() {
        return (!f.snap.gpus.is_empty())
            .then(|| Finding::skip("NVML gave no memory health (no driver, or a described machine)"));
    }
    let mut bad = Vec::new();
    let mut noted = Vec::new();
    for (i, h) in &asked {
        if h.remap_failed == Some(true) {
            bad.push(format!("GPU {i}: a row remap failed (no spare rows left)"));
        }
        if h.remap_pending == Some(true) || h.retirement_pending == Some(true) {
            bad.push(format!("GPU {i}: a memory repair waits for a GPU reset"));
        }
        if let Some(n) = h.ecc_uncorrected.filter(|n| *n > 0) {
            bad.push(format!(
                "GPU {i}: {n} uncorrectable ECC error(s) since the driver loaded"
            ));
        }
        if let Some(n) = h.remapped_uncorrectable.filter(|n| *n > 0) {
            noted.push(format!("GPU {i}: {n} row(s) remapped"));
        }
        if let Some(n) = h.retired_pages_dbe.filter(|n| *n > 0) {
            noted.push(format!("GPU {i}: {n} page(s) retired"));
        }
    }
    Some(if bad.is_empty() {
        let extra = if noted.is_empty() {
            String::new()
        } else {
            format!(" (repaired earlier: {})", noted.join("; "))
        };
        Finding::pass(format!(
            "{} GPU(s): no uncorrectable ECC error, no repair pending{extra}",
            asked.len()
        ))
    } else {
        Finding::fail(
            bad.join("; "),
            "drain the node; reset the GPU (nvidia-smi -r -i N) or reboot to apply a pending repair; a failed remap or errors that return mean the GPU needs service",
        )
    })
}

/// NVML's clocks event reasons (`nvmlClocksEventReason*`): the hardware's own slowdowns.
const HW_SLOWDOWN: u64 = 0x8;
const HW_THERMAL: u64 = 0x40;
const HW_POWER_BRAKE: u64 = 0x80;
const SW_POWER_CAP: u64 = 0x4;
const SW_THERMAL: u64 = 0x20;

/// `gpu-clocks`: a GPU whose clocks the hardware or a limit holds down now, without a job.
pub(super) fn gpu_clocks(f: &Facts) -> Option<Finding> {
    let asked: Vec<(u32, u64)> = f
        .snap
        .gpus
        .iter()
        .filter_map(|g| Some((g.index, g.health.as_ref()?.clock_event_reasons?)))
        .collect();
    if asked.is_empty() {
        return (!f.snap.gpus.is_empty())
            .then(|| Finding::skip("NVML gave no clock event reasons (no driver, or a described machine)"));
    }
    let named = |bits: u64, table: &[(u64, &'static str)]| -> Vec<&'static str> {
        table.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect()
    };
    let hard = [
        (HW_SLOWDOWN, "HW slowdown"),
        (HW_THERMAL, "HW thermal slowdown"),
        (HW_POWER_BRAKE, "HW power brake"),
    ];
    let soft = [(SW_THERMAL, "SW thermal slowdown"), (SW_POWER_CAP, "SW power cap")];
    let (mut fails, mut warns) = (Vec::new(), Vec::new());
    for (i, bits) in &asked {
        let h = named(*bits, &hard);
        if !h.is_empty() {
            fails.push(format!("GPU {i}: {}", h.join(", ")));
        }
        let s = named(*bits, &soft);
        if !s.is_empty() {
            warns.push(format!("GPU {i}: {}", s.join(", ")));
        }
    }
    Some(match (fails.is_empty(), warns.is_empty()) {
        (true, true) => Finding::pass(format!("{} GPU(s): no thermal, power or hardware slowdown active", asked.len())),
        (false, _) => Finding::fail(
            fails.into_iter().chain(warns).collect::<Vec<_>>().join("; "),
            "the hardware is slowing the GPU down: check cooling (nvidia-smi -q -d TEMPERATURE), the power supply and the baseboard's alerts; drain the node until it clears",
        ),
        (true, false) => Finding::warn(
            warns.join("; "),
            "clocks held by a thermal or power limit with no job running: check airflow and the power limit (nvidia-smi -q -d POWER)",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_lines_as_the_driver_writes_them() {
        let log = "6,1234,5678,-;NVRM: Xid (PCI:0000:2B:00): 79, pid=1, GPU has fallen off the bus.\n\
                   Oct 01 13:00:00 host kernel: NVRM: Xid (0000:01:00): 13, Graphics Exception\n\
                   NVRM: Xid (PCI:00000000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping\n\
                   NVRM: Xid (43, pid: 5678): ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR\n\
                   NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014\n";
        assert_eq!(
            xids(log),
            [
                Xid {
                    bus: "0000:2b:00".into(),
                    code: 79
                },
                Xid {
                    bus: "0000:01:00".into(),
                    code: 13
                },
                Xid {
                    bus: "0000:10:1c".into(),
                    code: 63
                },
            ]
        );
    }
}
