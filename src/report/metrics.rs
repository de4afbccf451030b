//! `doctor --textfile DIR`: the checks as Prometheus metrics in node-exporter's textfile
//! format (one gauge per node and check, stable check ids), so a fleet's IRQ skew or PCIe
//! degradation shows on a dashboard and can page someone.

use super::doctor::DoctorDetail;
use super::envelope::{NodeRow, NodeStatus};
use crate::doctor::Status;
use std::fmt::Write as _;

/// The file node-exporter's textfile collector reads (only `*.prom`; the temporary file a
/// write goes through does not end so).
pub(crate) const TEXTFILE: &str = "topo_tune_doctor.prom";

/// A label value in the text exposition format: backslash, double quote and newline escaped
/// as the format says; any other control character (a CR makes prometheus_client refuse the
/// whole file) written as the text of its escape, so a CR reads back as backslash-r.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&c.escape_debug().to_string().replace('\\', "\\\\")),
            c => out.push(c),
        }
    }
    out
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

/// One gauge: its `# HELP`/`# TYPE` lines, then one sample per `(labels, value)`.
fn gauge(out: &mut String, name: &str, help: &str, samples: impl IntoIterator<Item = (String, i64)>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// The metrics for these rows, taken at `unix_seconds`.
pub(crate) fn textfile(rows: &[NodeRow<Option<DoctorDetail>>], unix_seconds: u64) -> String {
    let mut out = String::new();
    let node = |r: &NodeRow<Option<DoctorDetail>>| format!("node=\"{}\"", label(&r.host));
    gauge(
        &mut out,
        "topo_tune_doctor_check_status",
        "topo-tune doctor check result: 0 pass, 1 warn, 2 fail, -1 not applicable.",
        rows.iter().flat_map(|r| {
            r.detail.iter().flat_map(|d| &d.checks).map(move |c| {
                (
                    format!("{},check=\"{}\"", node(r), label(&c.check)),
                    i64::from(value(c.status)),
                )
            })
        }),
    );
    gauge(
        &mut out,
        "topo_tune_doctor_failing_checks",
        "Checks that fail on the node.",
        rows.iter().filter_map(|r| {
            let d = r.detail.as_ref()?;
            let failing = d.checks.iter().filter(|c| c.status == Status::Fail).count();
            Some((node(r), failing as i64))
        }),
    );
    gauge(
        &mut out,
        "topo_tune_doctor_node_checked",
        "1 when doctor reached the node and ran its checks.",
        rows.iter().map(|r| (node(r), i64::from(r.status == NodeStatus::Ok))),
    );
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
    use crate::doctor::Check;
    use crate::model::{Failure, FailureKind};

    fn check(name: &str, status: Status) -> Check {
        Check {
            check: name.into(),
            status,
            detail: String::new(),
            fix: None,
        }
    }

    #[test]
    fn label_values_never_hold_a_control_character() {
        assert_eq!(label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        let shown = label("node1\rfake\u{1b}[2J\0");
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(shown, "node1\\\\rfake\\\\u{1b}[2J\\\\0");
    }

    #[test]
    fn one_gauge_per_node_and_check_with_labels_escaped() {
        let rows = vec![
            NodeRow::ok(
                "gpu\"1",
                false,
                Some(DoctorDetail {
                    checks: vec![check("pcie-link", Status::Fail), check("acs", Status::Skip)],
                    versions: None,
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
