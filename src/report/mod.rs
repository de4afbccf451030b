//! Renders typed results for people (tables) and for programs (the JSON envelope): one source,
//! two forms.

pub(crate) mod apply;
pub(crate) mod collect;
pub(crate) mod diagnose;
pub(crate) mod doctor;
pub(crate) mod envelope;
pub(crate) mod fabric;
pub(crate) mod fold;
pub(crate) mod irq;
pub(crate) mod matrix;
pub(crate) mod metrics;
pub(crate) mod plan;
pub(crate) mod printer;
pub(crate) mod probe;
pub(crate) mod status;
pub(crate) mod trace;
pub(crate) mod tune;
pub(crate) mod write;

pub(crate) use printer::{Format, Printer};

use crate::model::Failure;
use comfy_table::{presets, ContentArrangement, Table};

/// A table in the house style: plain aligned columns (grep- and eye-friendly, like kubectl).
pub(crate) fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().map(|h| h.to_string()));
    t
}

/// Text for a terminal with every control character shown, not obeyed (as `ls` and `git`
/// do): `\x1b`, `\r`, `\t`… Newlines stay. Everything topo-tune prints for people goes
/// through here, so no name or message from a node can move the cursor, rewrite a line or
/// set a window title.
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| (c.is_control() && c != '\n') || crate::model::is_deceptive(c);
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if crate::model::is_deceptive(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A node's failure, the same words in every table: `kind: message`.
pub(crate) fn failure_text(f: &Failure) -> String {
    format!("{}: {}", f.kind.name(), f.message)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_not_obeyed() {
        let forged = "n1\r\x1b[2Kall nodes ok\x1b]0;pwned\x07\n";
        let shown = super::visible(forged);
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{shown}");
        assert_eq!(shown, "n1\\r\\x1b[2Kall nodes ok\\x1b]0;pwned\\x07\n");
        assert!(matches!(super::visible("plain\n"), std::borrow::Cow::Borrowed(_)));
        // A right-to-left override makes `gpu-01\u{202e}10-upg` read as another name.
        assert_eq!(super::visible("gpu-01\u{202e}x\u{2028}y"), "gpu-01\\u{202e}x\\u{2028}y");
    }
}
