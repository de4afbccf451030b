//! A node's doctor answer, checked before anything shows it, counts it or writes it as a
//! gauge: the checks this build knows, each once, at least one, every text bounded, and a
//! host name that is a host name. (Whether the name is another node of the inventory is the
//! flow's to say: only it knows the inventory.)

use super::finding::{Check, MAX_TEXT};

/// Why a node's doctor answer cannot be taken as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadReport {
    #[error("{0}")]
    HostName(String),
    #[error("no checks: a node that ran doctor answers with every check it ran")]
    Empty,
    #[error("{0} checks, more than the {1} this doctor has")]
    TooMany(usize, usize),
    #[error("checks[{0}].check: `{1}` is no check of this doctor")]
    Unknown(usize, String),
    #[error("checks[{0}].check: `{1}` answered twice")]
    Twice(usize, String),
    #[error("checks[{0}].{1}: {2} bytes, more than {MAX_TEXT}")]
    TooLong(usize, &'static str, usize),
}

/// Why a node's checks cannot be taken as they are; `known`: the ids of this doctor's checks.
pub(crate) fn check_report(hostname: &str, checks: &[Check], known: &[&str]) -> Result<(), BadReport> {
    crate::model::snapshot_check::host_name(hostname).map_err(|e| BadReport::HostName(e.to_string()))?;
    if checks.is_empty() {
        return Err(BadReport::Empty);
    }
    if checks.len() > known.len() {
        return Err(BadReport::TooMany(checks.len(), known.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, c) in checks.iter().enumerate() {
        if !known.contains(&c.check.as_str()) {
            let shown: String = c.check.chars().take(64).flat_map(char::escape_debug).collect();
            return Err(BadReport::Unknown(i, shown));
        }
        if !seen.insert(c.check.as_str()) {
            return Err(BadReport::Twice(i, c.check.clone()));
        }
        for (field, text) in [("detail", Some(&c.detail)), ("fix", c.fix.as_ref())] {
            match text {
                Some(t) if t.len() > MAX_TEXT => return Err(BadReport::TooLong(i, field, t.len())),
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::finding::{bounded, Status, CUT};
    use crate::doctor::CHECKS;

    fn check(hostname: &str, checks: &[Check]) -> Result<(), BadReport> {
        let known: Vec<&str> = CHECKS.iter().map(|d| d.id).collect();
        check_report(hostname, checks, &known)
    }

    fn row(id: &str) -> Check {
        Check {
            check: id.into(),
            status: Status::Pass,
            detail: "ok".into(),
            fix: None,
        }
    }

    #[test]
    fn an_answer_is_the_checks_this_doctor_knows_each_once() {
        let all: Vec<Check> = CHECKS.iter().map(|d| row(d.id)).collect();
        assert_eq!(check("n1", &all), Ok(()));
        assert_eq!(check("n1", &all[..3]), Ok(()));
        assert!(check("n1", &[]).unwrap_err().to_string().starts_with("no checks"));
        let unknown = [row("mlx5-irq-placement"), row("rm -rf")];
        assert_eq!(
            check("n1", &unknown).unwrap_err().to_string(),
            "checks[1].check: `rm -rf` is no check of this doctor"
        );
        let twice = [row("limits"), row("limits")];
        assert_eq!(
            check("n1", &twice).unwrap_err().to_string(),
            "checks[1].check: `limits` answered twice"
        );
        let many: Vec<Check> = (0..100_000).map(|_| row("limits")).collect();
        assert!(check("n1", &many)
            .unwrap_err()
            .to_string()
            .contains("100000 checks, more than"));
        let mut long = row("limits");
        long.detail = "x".repeat(10 << 20);
        assert!(check("n1", &[long])
            .unwrap_err()
            .to_string()
            .starts_with("checks[0].detail: 10485760 bytes"));
        assert!(check("n1\rfake", &all).is_err());
        assert!(check("", &all).is_err());
    }

    #[test]
    fn texts_are_cut_where_they_are_made() {
        let long = "é".repeat(MAX_TEXT);
        let cut = bounded(long);
        assert!(cut.len() <= MAX_TEXT && cut.ends_with(CUT), "{}", cut.len());
        assert_eq!(bounded("short".into()), "short");
    }
}
