//! What a doctor check says: a `Finding` (its status, the evidence, the fix if there is one),
//! and the `Check` row it becomes on the wire and in the table once the registry names it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Pass,
    Skip,
    Warn,
    Fail,
}

/// What one check found on a node; the registry adds which check it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) status: Status,
    pub(crate) detail: String,
    /// What to do about it; `None` where there is nothing to do.
    pub(crate) fix: Option<String>,
}

impl Finding {
    pub(crate) fn new(status: Status, detail: impl Into<String>) -> Finding {
        Finding {
            status,
            detail: detail.into(),
            fix: None,
        }
    }

    pub(crate) fn pass(detail: impl Into<String>) -> Finding {
        Finding::new(Status::Pass, detail)
    }

    pub(crate) fn skip(detail: impl Into<String>) -> Finding {
        Finding::new(Status::Skip, detail)
    }

    pub(crate) fn warn(detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding::new(Status::Warn, detail).fix(fix)
    }

    pub(crate) fn fail(detail: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding::new(Status::Fail, detail).fix(fix)
    }

    /// The same finding with a fix.
    pub(crate) fn fix(self, fix: impl Into<String>) -> Finding {
        Finding {
            fix: Some(fix.into()),
            ..self
        }
    }
}

/// The longest detail or fix a check writes; a longer one is cut where it is made
/// ([`bounded`]), so a longer one in an answer was not made by a doctor.
pub(crate) const MAX_TEXT: usize = 8 << 10;
/// What a cut text ends with.
pub(super) const CUT: &str = " … (cut)";

/// `text`, cut at a character boundary so that it stays within [`MAX_TEXT`] bytes.
pub(crate) fn bounded(mut text: String) -> String {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let mut end = MAX_TEXT - CUT.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(CUT);
    text
}

/// One row of doctor's table: a finding under its check's id. On the wire (node answers, the
/// JSON envelope) `fix` is a string, empty where there is none (doctor.schema.json).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Check {
    pub(crate) check: String,
    pub(crate) status: Status,
    pub(crate) detail: String,
    #[serde(serialize_with = "fix_out", deserialize_with = "fix_in")]
    pub(crate) fix: Option<String>,
}

impl Check {
    pub(crate) fn of(id: &str, f: Finding) -> Check {
        Check {
            check: id.to_string(),
            status: f.status,
            detail: bounded(f.detail),
            fix: f.fix.map(bounded),
        }
    }
}

fn fix_out<S: Serializer>(fix: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(fix.as_deref().unwrap_or(""))
}

fn fix_in<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    Ok(Some(text).filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fix_is_an_empty_string_on_the_wire_and_back() {
        let none = Check::of("gdr", Finding::pass("ok"));
        let json = serde_json::to_string(&none).unwrap();
        assert_eq!(json, r#"{"check":"gdr","status":"pass","detail":"ok","fix":""}"#);
        assert_eq!(serde_json::from_str::<Check>(&json).unwrap(), none);
        let some = Check::of("gdr", Finding::fail("off", "modprobe nvidia_peermem"));
        let back: Check = serde_json::from_str(&serde_json::to_string(&some).unwrap()).unwrap();
        assert_eq!(back.fix.as_deref(), Some("modprobe nvidia_peermem"));
    }
}
