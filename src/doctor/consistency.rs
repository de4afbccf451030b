//! `cluster-consistency`: nodes of one class that run another NCCL, driver, CUDA, kernel or NIC
//! firmware than the rest of their class — the classic cause of a job that hangs or runs at
//! the pace of its odd node. Each node reports what it runs ([`Versions`], with its doctor
//! answer); the controller compares them here, per class (the same GPUs), naming the odd
//! nodes against the majority. NIC firmware is compared per board (`board_id`, the card's
//! PSID): two card models legitimately run two firmware lines.

use super::finding::Finding;
use crate::model::snapshot::NodeSnapshot;
use crate::probe::fsroot::FsRoot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The check's id (the registry's, and what the controller adds to each node's answer).
pub(crate) const CHECK: &str = "cluster-consistency";

/// The most NIC boards a node may report, and the longest text of any field.
pub(crate) const MAX_BOARDS: usize = 64;
pub(crate) const MAX_FIELD: usize = 256;

/// A firmware string that is not short plain text, as a node reports it.
const NOT_PLAIN: &str = "(not plain text)";

/// What a node runs, as it reports it with its doctor answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Versions {
    /// The GPUs, counted by model (`8× NVIDIA H200`): nodes are compared within a class.
    pub(crate) class: String,
    #[serde(default)]
    pub(crate) nccl: Option<String>,
    #[serde(default)]
    pub(crate) driver: Option<String>,
    #[serde(default)]
    pub(crate) cuda: Option<String>,
    #[serde(default)]
    pub(crate) kernel: Option<String>,
    /// NIC board (`board_id`) → firmware (`fw_ver`).
    #[serde(default)]
    pub(crate) nic_firmware: BTreeMap<String, String>,
}

/// Why a node's versions cannot be taken as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadVersions(String);

impl Versions {
    /// Why a node's report cannot be taken: too many boards, or a field that is not short
    /// plain text.
    pub(crate) fn check(&self) -> Result<(), BadVersions> {
        if self.nic_firmware.len() > MAX_BOARDS {
            return Err(BadVersions(format!(
                "versions.nic_firmware: {} boards, more than {MAX_BOARDS}",
                self.nic_firmware.len()
            )));
        }
        let fields = [
            &Some(self.class.clone()),
            &self.nccl,
            &self.driver,
            &self.cuda,
            &self.kernel,
        ];
        let texts = fields
            .into_iter()
            .flatten()
            .chain(self.nic_firmware.iter().flat_map(|(k, v)| [k, v]));
        for t in texts {
            if t.len() > MAX_FIELD || t.chars().any(char::is_control) {
                return Err(BadVersions("versions: a field that is not short plain text".into()));
            }
        }
        Ok(())
    }
}

/// What this node runs: its snapshot's NCCL, driver, CUDA and kernel, and each RDMA NIC's
/// firmware from sysfs (`/sys/class/infiniband/<dev>/{board_id,fw_ver}`).
pub(crate) fn versions(fs: &FsRoot, snap: &NodeSnapshot) -> Versions {
    let mut models: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &snap.gpus {
        *models.entry(g.name.as_str()).or_default() += 1;
    }
    let class = if models.is_empty() {
        "no GPU".to_string()
    } else {
        models
            .iter()
            .map(|(m, n)| format!("{n}× {m}"))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    // Per board, every firmware its cards run (two cards of one board on two firmwares are
    // one node's mismatch, and show as a value no other node has).
    let mut per_board: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for dev in snap
        .nics
        .iter()
        .filter_map(|n| n.rdma.as_ref())
        .map(|r| r.device.as_str())
    {
        let base = format!("/sys/class/infiniband/{dev}");
        if let (Some(board), Some(fw)) = (
            fs.read_trimmed(&format!("{base}/board_id")),
            fs.read_trimmed(&format!("{base}/fw_ver")),
        ) {
            // A firmware string that is not short plain text is compared as that, not
            // dropped: dropping it made the node look as if it had no such card.
            let fw = if fw.len() <= MAX_FIELD && !fw.chars().any(char::is_control) {
                fw
            } else {
                NOT_PLAIN.to_string()
            };
            if per_board.len() < MAX_BOARDS || per_board.contains_key(&board) {
                per_board.entry(board).or_default().insert(fw);
            }
        }
    }
    let nic_firmware: BTreeMap<String, String> = per_board
        .into_iter()
        .map(|(b, fws)| (b, fws.into_iter().collect::<Vec<_>>().join(" + ")))
        .collect();
    let short = |s: Option<String>| s.filter(|t| t.len() <= MAX_FIELD && !t.chars().any(char::is_control));
    Versions {
        class: short(Some(class)).unwrap_or_default(),
        nccl: snap.nccl_version.map(|v| v.to_string()),
        driver: short(snap.machine.nvidia_driver.clone()),
        cuda: short(snap.machine.cuda_driver.clone()),
        kernel: short(snap.machine.kernel.clone()),
        nic_firmware: nic_firmware
            .into_iter()
            .filter(|(b, f)| short(Some(b.clone())).is_some() && short(Some(f.clone())).is_some())
            .collect(),
    }
}

/// On one node there is nothing to compare: the controller judges this check from every
/// node's [`Versions`] (`compare`), after the nodes answer.
pub(super) fn on_one_node(_: &super::facts::Facts) -> Option<Finding> {
    None
}

/// A field compared across a class: its name, how bad a mismatch is, and each node's value.
struct Field<'a> {
    name: String,
    /// A mismatch fails (NCCL, driver, CUDA: hangs and wrong results) or warns (kernel, NIC
    /// firmware: slowdowns worth aligning).
    fails: bool,
    /// Every node has one (NCCL, driver, CUDA, kernel): a node without it did not report it.
    /// A NIC board only the nodes that carry it report.
    every_node: bool,
    values: Vec<(&'a str, &'a str)>,
}

/// Per node of `nodes` (host, what it runs), the `cluster-consistency` finding.
pub(crate) fn compare<'a>(nodes: &[(&'a str, &'a Versions)]) -> Vec<(&'a str, Finding)> {
    let mut classes: BTreeMap<&str, Vec<(&str, &Versions)>> = BTreeMap::new();
    for (h, v) in nodes {
        classes.entry(v.class.as_str()).or_default().push((h, v));
    }
    let mut out = Vec::new();
    for (class, members) in classes {
        if members.len() < 2 {
            for (h, _) in members {
                out.push((
                    h,
                    Finding::skip(format!("the only node of its class ({class}) here: nothing to compare")),
                ));
            }
            continue;
        }
        out.extend(judge_class(class, &members));
    }
    // The caller's order.
    out.sort_by_key(|(h, _)| nodes.iter().position(|(n, _)| n == h));
    out
}

/// One version field of a node's report.
type Getter = fn(&Versions) -> Option<&String>;

fn fields<'a>(members: &[(&'a str, &'a Versions)]) -> Vec<Field<'a>> {
    let simple: [(&str, bool, Getter); 4] = [
        ("NCCL", true, |v| v.nccl.as_ref()),
        ("driver", true, |v| v.driver.as_ref()),
        ("CUDA", true, |v| v.cuda.as_ref()),
        ("kernel", false, |v| v.kernel.as_ref()),
    ];
    let mut out: Vec<Field> = simple
        .iter()
        .map(|(name, fails, get)| Field {
            name: name.to_string(),
            fails: *fails,
            every_node: true,
            values: members
                .iter()
                .filter_map(|(h, v)| Some((*h, get(v)?.as_str())))
                .collect(),
        })
        .collect();
    let boards: std::collections::BTreeSet<&str> = members
        .iter()
        .flat_map(|(_, v)| v.nic_firmware.keys().map(String::as_str))
        .collect();
    for b in boards {
        out.push(Field {
            name: format!("NIC firmware ({b})"),
            fails: false,
            every_node: false,
            values: members
                .iter()
                .filter_map(|(h, v)| Some((*h, v.nic_firmware.get(b)?.as_str())))
                .collect(),
        });
    }
    out
}

/// Each node of one class against the class's majority, field by field.
fn judge_class<'a>(class: &str, members: &[(&'a str, &'a Versions)]) -> Vec<(&'a str, Finding)> {
    let mut odd: BTreeMap<&str, Vec<(String, bool)>> = BTreeMap::new();
    let mut same: Vec<String> = Vec::new();
    // Nodes that did not report a field every node has (unreadable, or not plain text): not
    // compared on it, and their rows say so rather than claim the class's value. A field no
    // node reports (no NCCL anywhere) is nobody's gap.
    let mut unreported: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for f in fields(members) {
        if f.every_node && !f.values.is_empty() && f.values.len() < members.len() {
            for (h, _) in members.iter().filter(|(h, _)| !f.values.iter().any(|(x, _)| x == h)) {
                unreported.entry(h).or_default().push(f.name.clone());
            }
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, v) in &f.values {
            *counts.entry(v).or_default() += 1;
        }
        let Some((&major, &n)) = counts.iter().max_by_key(|(_, n)| **n) else {
            continue;
        };
        if counts.len() == 1 {
            // Said only when every node reported it: a node that did not is not "the same".
            if f.values.len() == members.len() || !f.every_node {
                same.push(format!("{} {major}", f.name));
            }
            continue;
        }
        let tie = counts.values().filter(|c| **c == n).count() > 1;
        for (h, v) in &f.values {
            if *v != major || tie {
                let text = if tie {
                    format!("{} {v}, with no majority in its class ({})", f.name, spread(&counts))
                } else {
                    format!(
                        "{} {v} where {n} of {} nodes of its class run {major}",
                        f.name,
                        f.values.len()
                    )
                };
                odd.entry(h).or_default().push((text, f.fails));
            }
        }
    }
    for (h, names) in unreported {
        odd.entry(h).or_default().push((
            format!(
                "{} not reported (unreadable here, or not plain text): not compared with its class",
                names.join(", ")
            ),
            false,
        ));
    }
    let odd_hosts: Vec<String> = odd.keys().map(|h| h.to_string()).collect();
    members
        .iter()
        .map(|(h, _)| {
            let finding = match odd.get(h) {
                None => Finding::pass(format!(
                    "the same {} as the other {} node(s) of its class ({class}){}",
                    if same.is_empty() { "versions".into() } else { same.join(", ") },
                    members.len() - 1,
                    if odd_hosts.is_empty() {
                        String::new()
                    } else {
                        format!("; odd one(s) out: {}", super::facts::few(&odd_hosts))
                    }
                )),
                Some(diffs) => {
                    let detail = diffs.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join("; ");
                    let fix = "align this node with its class (install the version the rest runs) or keep it out of jobs with them: a job's ranks need the same NCCL, driver and CUDA to agree on protocols";
                    if diffs.iter().any(|(_, fails)| *fails) {
                        Finding::fail(detail, fix)
                    } else {
                        Finding::warn(detail, fix)
                    }
                }
            };
            (*h, finding)
        })
        .collect()
}

fn spread(counts: &BTreeMap<&str, usize>) -> String {
    counts
        .iter()
        .map(|(v, n)| format!("{v} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::finding::Status;
    use super::*;

    fn v(driver: &str, kernel: &str, fw: &str) -> Versions {
        Versions {
            class: "8× NVIDIA H200".into(),
            nccl: Some("2.28.3".into()),
            driver: Some(driver.into()),
            cuda: Some("12.8".into()),
            kernel: Some(kernel.into()),
            nic_firmware: [("MT_0000000838".to_string(), fw.to_string())].into(),
        }
    }

    #[test]
    fn the_odd_node_is_named_against_the_majority_of_its_class() {
        let (a, b, c, d) = (
            v("570.86", "6.8.0", "28.39.1002"),
            v("570.86", "6.8.0", "28.39.1002"),
            v("550.54", "6.8.0", "28.39.1002"),
            v("570.86", "6.5.0", "28.40.1000"),
        );
        let mut e = v("570.86", "6.8.0", "28.39.1002");
        e.class = "8× NVIDIA B200".into();
        let got = compare(&[("a", &a), ("b", &b), ("c", &c), ("d", &d), ("e", &e)]);
        let by: BTreeMap<&str, &Finding> = got.iter().map(|(h, f)| (*h, f)).collect();
        assert_eq!(by["a"].status, Status::Pass);
        assert!(by["a"].detail.contains("odd one(s) out: c, d"), "{}", by["a"].detail);
        assert_eq!(by["c"].status, Status::Fail, "a driver mismatch fails");
        assert_eq!(
            by["c"].detail,
            "driver 550.54 where 3 of 4 nodes of its class run 570.86"
        );
        assert_eq!(by["d"].status, Status::Warn, "kernel and firmware warn");
        assert!(
            by["d"].detail.contains("kernel 6.5.0 where 3 of 4")
                && by["d"].detail.contains("NIC firmware (MT_0000000838) 28.40.1000")
        );
        assert_eq!(by["e"].status, Status::Skip, "alone in its class");
        assert_eq!(
            got.iter().map(|(h, _)| *h).collect::<Vec<_>>(),
            ["a", "b", "c", "d", "e"]
        );
    }

    /// Before: a node whose kernel could not be read was left out of the comparison and its
    /// pass row said "the same kernel 6.8.0"; a firmware string with a control character was
    /// dropped, as if the card were not there.
    #[test]
    fn a_version_a_node_did_not_report_is_said_not_claimed() {
        let (a, b) = (v("570.86", "6.8.0", "28.39.1002"), v("570.86", "6.8.0", "28.39.1002"));
        let mut c = v("570.86", "6.8.0", "28.39.1002");
        c.kernel = None;
        let got = compare(&[("a", &a), ("b", &b), ("c", &c)]);
        let by: BTreeMap<&str, &Finding> = got.iter().map(|(h, f)| (*h, f)).collect();
        assert_eq!(by["c"].status, Status::Warn);
        assert_eq!(
            by["c"].detail,
            "kernel not reported (unreadable here, or not plain text): not compared with its class"
        );
        assert_eq!(by["a"].status, Status::Pass);
        assert!(
            !by["a"].detail.contains("kernel"),
            "a kernel not every node reported is no claim: {}",
            by["a"].detail
        );
        assert!(by["a"].detail.contains("driver 570.86"), "{}", by["a"].detail);
        // The firmware as read: a control character makes it `(not plain text)`, compared.
        let d = v("570.86", "6.8.0", NOT_PLAIN);
        let got = compare(&[("a", &a), ("b", &b), ("d", &d)]);
        let by: BTreeMap<&str, &Finding> = got.iter().map(|(h, f)| (*h, f)).collect();
        assert!(
            by["d"]
                .detail
                .contains("NIC firmware (MT_0000000838) (not plain text) where 2 of 3"),
            "{}",
            by["d"].detail
        );
    }

    #[test]
    fn two_against_two_has_no_majority_and_both_sides_are_told() {
        let (a, b) = (v("570.86", "6.8.0", "x"), v("550.54", "6.8.0", "x"));
        let got = compare(&[("a", &a), ("b", &b)]);
        assert!(got
            .iter()
            .all(|(_, f)| f.status == Status::Fail && f.detail.contains("no majority")));
    }
}
