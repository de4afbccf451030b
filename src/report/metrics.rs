//! `doctor --textfile DIR`: the checks as Prometheus metrics in node-exporter's textfile
//! format (one gauge per node and check, stable check ids), so a fleet's IRQ skew or PCIe
//! degradation shows on a dashboard and can page someone.

use super::doctor::DoctorDetail;
use super::envelope::{NodeRow, NodeStatus};
use crate::irq::doctor::Status;
use std::fmt::Write as _;

/// The file node-exporter's textfile collector reads (only `*.prom`; the temporary file a
/// write goes through does not end so).
pub const TEXTFILE: &str = "topo_tune_doctor.prom";

/// A label value in the exposition format: `\`, `"` and newlines escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// 0 pass, 1 warn, 2 fail; -1 when the check does not apply here (skipped).
fn value(status: Status) -> i32 {
    match status {
        Status::Pass => 0,
        Status::Warn => 1,
        Status::Fail => 2,
        Status::Skip => -1,
    }
}

/// The metrics for these rows, taken at `unix_seconds`.
pub fn textfile(rows: &[NodeRow<Option<DoctorDetail>>], unix_seconds: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP topo_tune_doctor_check_status topo-tune doctor check result: 0 pass, 1 warn, 2 fail, -1 not applicable.\n\
         # TYPE topo_tune_doctor_check_status gauge"
    );
    for r in rows {
        for c in r.detail.iter().flat_map(|d| &d.checks) {
            let _ = writeln!(
                out,
                "topo_tune_doctor_check_status{{node=\"{}\",check=\"{}\"}} {}",
                label(&r.host),
                label(&c.check),
                value(c.status)
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP topo_tune_doctor_failing_checks Checks that fail on the node.\n\
         # TYPE topo_tune_doctor_failing_checks gauge"
    );
    for r in rows.iter().filter(|r| r.detail.is_some()) {
        let failing = r
            .detail
            .iter()
            .flat_map(|d| &d.checks)
            .filter(|c| c.status == Status::Fail)
            .count();
        let _ = writeln!(
            out,
            "topo_tune_doctor_failing_checks{{node=\"{}\"}} {failing}",
            label(&r.host)
        );
    }
    let _ = writeln!(
        out,
        "# HELP topo_tune_doctor_node_checked 1 when doctor reached the node and ran its checks.\n\
         # TYPE topo_tune_doctor_node_checked gauge"
    );
    for r in rows {
        let checked = u8::from(r.status == NodeStatus::Ok);
        let _ = writeln!(
            out,
            "topo_tune_doctor_node_checked{{node=\"{}\"}} {checked}",
            label(&r.host)
        );
    }
    let _ = writeln!(
        out,
        "# HELP topo_tune_doctor_last_run_timestamp_seconds When these figures were taken.\n\
         # TYPE topo_tune_doctor_last_run_timestamp_seconds gauge\n\
         topo_tune_doctor_last_run_timestamp_seconds {unix_seconds}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::irq::doctor::Check;
    use crate::transport::{Failure, FailureKind};

    fn check(name: &str, status: Status) -> Check {
        Check {
            check: name.into(),
            status,
            detail: String::new(),
            fix: String::new(),
        }
    }

    #[test]
    fn one_gauge_per_node_and_check_with_labels_escaped() {
        let rows = vec![
            NodeRow::ok(
                "gpu\"1",
                false,
                Some(DoctorDetail {
                    checks: vec![check("pcie-link", Status::Fail), check("acs", Status::Skip)],
                }),
            ),
            NodeRow::failed("gpu2", Failure::new(FailureKind::ConnectRefused, "refused"), None),
        ];
        let text = textfile(&rows, 1_700_000_000);
        assert!(
            text.contains("topo_tune_doctor_check_status{node=\"gpu\\\"1\",check=\"pcie-link\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("topo_tune_doctor_check_status{node=\"gpu\\\"1\",check=\"acs\"} -1\n"));
        assert!(text.contains("topo_tune_doctor_failing_checks{node=\"gpu\\\"1\"} 1\n"));
        assert!(text.contains("topo_tune_doctor_node_checked{node=\"gpu2\"} 0\n"));
        assert!(
            !text.contains("failing_checks{node=\"gpu2\"}"),
            "no figure for a node not checked"
        );
        assert!(text.ends_with("topo_tune_doctor_last_run_timestamp_seconds 1700000000\n"));
        // Every sample line is `name{labels} value` or `name value`; comments are HELP/TYPE.
        for line in text.lines() {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE ") || line.starts_with("topo_tune_doctor_")
            );
        }
    }
}
