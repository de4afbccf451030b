//! `limits`: what RDMA and NCCL need from the process limits jobs get — locked memory
//! unlimited (the verbs stack pins every registered buffer), and no unlimited stack with NCCL
//! before 2.28 (its deeply recursive multi-node NVLink search then overran 2 MB thread stacks:
//! NVIDIA/nccl#2186; 2.28 resets an unsafe stack limit). Read from where a job's limits come
//! from: systemd's `DefaultLimit*` (system.conf and system.conf.d), PAM's limits.conf and
//! limits.d, and slurmd's unit when there is one (Slurm propagates its own limits to jobs).

use super::conf::read_config;
use super::facts::Facts;
use super::finding::Finding;
use crate::model::NcclVersion;
use crate::probe::fsroot::FsRoot;

/// One source's statement of a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stated {
    source: String,
    value: String,
}

fn unlimited(v: &str) -> bool {
    matches!(v.trim(), "unlimited" | "infinity" | "-1")
}

/// What `stated` finds on each line of each file (at most 10,000 lines a file).
fn each_line(
    fs: &FsRoot,
    files: &[String],
    unreadable: &mut Vec<String>,
    stated: impl Fn(&str, &str) -> Option<Stated>,
) -> Vec<Stated> {
    let mut out = Vec::new();
    for file in files {
        let text = read_config(fs, file, unreadable).unwrap_or_default();
        out.extend(text.lines().take(10_000).filter_map(|l| stated(file, l)));
    }
    out
}

/// `DefaultLimitMEMLOCK=` (or `LimitMEMLOCK=` in a unit) in the files of a systemd config.
fn systemd(fs: &FsRoot, files: &[String], key: &str, unreadable: &mut Vec<String>) -> Vec<Stated> {
    each_line(fs, files, unreadable, |file, l| {
        let v = l.trim().strip_prefix(key)?.strip_prefix('=')?.trim();
        // `soft:hard`: the soft limit is what a process starts with.
        let soft = v.split(':').next().unwrap_or(v).trim();
        (!soft.is_empty()).then(|| Stated {
            source: format!("{file} ({key})"),
            value: soft.to_string(),
        })
    })
}

/// `<domain> <type> <item> <value>` lines of limits.conf and limits.d for `item`.
fn pam(fs: &FsRoot, item: &str, unreadable: &mut Vec<String>) -> Vec<Stated> {
    let mut files = vec!["/etc/security/limits.conf".to_string()];
    files.extend(
        fs.list("/etc/security/limits.d")
            .into_iter()
            .filter(|n| n.ends_with(".conf"))
            .map(|n| format!("/etc/security/limits.d/{n}")),
    );
    each_line(fs, &files, unreadable, |file, l| {
        let l = l.split('#').next().unwrap_or("");
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 4 && w[2] == item && matches!(w[1], "soft" | "-")).then(|| Stated {
            source: format!("{file} ({} {} {item})", w[0], w[1]),
            value: w[3].to_string(),
        })
    })
}

fn system_conf(fs: &FsRoot) -> Vec<String> {
    let mut files = vec!["/etc/systemd/system.conf".to_string()];
    files.extend(
        fs.list("/etc/systemd/system.conf.d")
            .into_iter()
            .filter(|n| n.ends_with(".conf"))
            .map(|n| format!("/etc/systemd/system.conf.d/{n}")),
    );
    files
}

/// slurmd's unit and its drop-ins, when slurmd is installed.
fn slurmd_unit(fs: &FsRoot) -> Vec<String> {
    let mut files: Vec<String> = [
        "/etc/systemd/system/slurmd.service",
        "/lib/systemd/system/slurmd.service",
        "/usr/lib/systemd/system/slurmd.service",
    ]
    .into_iter()
    .filter(|f| fs.exists(f))
    .map(str::to_string)
    .collect();
    files.extend(
        fs.list("/etc/systemd/system/slurmd.service.d")
            .into_iter()
            .filter(|n| n.ends_with(".conf"))
            .map(|n| format!("/etc/systemd/system/slurmd.service.d/{n}")),
    );
    files
}

pub(super) fn limits(f: &Facts) -> Option<Finding> {
    if f.snap.gpus.is_empty() {
        return Some(Finding::skip("no GPU"));
    }
    let mut unreadable = Vec::new();
    let system = system_conf(f.fs);
    let slurmd = slurmd_unit(f.fs);
    let mut memlock = systemd(f.fs, &system, "DefaultLimitMEMLOCK", &mut unreadable);
    memlock.extend(pam(f.fs, "memlock", &mut unreadable));
    memlock.extend(systemd(f.fs, &slurmd, "LimitMEMLOCK", &mut unreadable));
    let mut warns = Vec::new();
    let rdma = f.snap.nics.iter().any(|n| n.kind == crate::model::NicKind::Rdma);
    if rdma {
        let finite: Vec<String> = memlock
            .iter()
            .filter(|s| !unlimited(&s.value))
            .map(|s| format!("{} = {}", s.source, s.value))
            .collect();
        if !finite.is_empty() {
            warns.push(format!(
                "locked memory is limited: {} (RDMA registers every buffer NCCL uses)",
                finite.join(", ")
            ));
        } else if memlock.is_empty() {
            warns.push("no source raises the locked-memory limit (systemd system.conf, limits.conf, limits.d, slurmd's unit): the default (8 MiB on systemd ≥ 253, 64 KiB before) applies, too little for RDMA".to_string());
        }
    }
    let mut stack = systemd(f.fs, &system, "DefaultLimitSTACK", &mut Vec::new());
    stack.extend(pam(f.fs, "stack", &mut Vec::new()));
    stack.extend(systemd(f.fs, &slurmd, "LimitSTACK", &mut Vec::new()));
    let old = f.nccl.is_none_or(|v| v < NcclVersion(2, 28, 0));
    if let Some(s) = stack.iter().find(|s| unlimited(&s.value)).filter(|_| old) {
        warns.push(format!(
            "{} sets the stack limit unlimited and NCCL {} predates 2.28: glibc then gives threads 2 MB stacks, which NCCL's multi-node NVLink search overran (SIGSEGV at init, NVIDIA/nccl#2186)",
            s.source,
            f.nccl.map_or_else(|| "(version unknown)".to_string(), |v| v.to_string())
        ));
    }
    unreadable.dedup();
    warns.extend(
        unreadable
            .iter()
            .map(|u| format!("cannot read {u}: the limit it sets is unknown")),
    );
    let read: Vec<&str> = memlock.iter().chain(&stack).map(|s| s.source.as_str()).collect();
    Some(if warns.is_empty() {
        Finding::pass(if read.is_empty() {
            "no RDMA NIC, and no stack limit set unlimited".to_string()
        } else {
            format!("locked memory unlimited, stack bounded ({})", read.join(", "))
        })
    } else {
        Finding::warn(warns.join("; "), "DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf (and LimitMEMLOCK=infinity for slurmd), `* - memlock unlimited` in /etc/security/limits.d/; keep the stack limit finite (8192) before NCCL 2.28")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_as_their_files_write_them() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc/security/limits.d");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            dir.path().join("etc/security/limits.conf"),
            "# comment\n*  hard  memlock  unlimited\n@gpu soft memlock 65536 # trailing\n* - stack unlimited\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("etc/systemd")).unwrap();
        std::fs::write(
            dir.path().join("etc/systemd/system.conf"),
            "[Manager]\nDefaultLimitMEMLOCK=infinity:infinity\n",
        )
        .unwrap();
        let fs = FsRoot::new(dir.path());
        let memlock = pam(&fs, "memlock", &mut Vec::new());
        assert_eq!(
            memlock.len(),
            1,
            "hard limits are not what a job starts with: {memlock:?}"
        );
        assert_eq!(memlock[0].value, "65536");
        assert!(pam(&fs, "stack", &mut Vec::new()).iter().any(|s| unlimited(&s.value)));
        let sd = systemd(&fs, &system_conf(&fs), "DefaultLimitMEMLOCK", &mut Vec::new());
        assert_eq!(sd[0].value, "infinity");
        assert!(unlimited(&sd[0].value));
    }
}
