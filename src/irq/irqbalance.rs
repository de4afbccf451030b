//! irqbalance: is it running, does it leave mlx5 alone, and the ban topo-tune can write
//! (`--banmod=mlx5`, irqbalance >= 1.1.0: bans every IRQ whose driver or name contains mlx5;
//! research/irq.md §3.2). topo-tune never stops irqbalance silently.

use crate::probe::fsroot::FsRoot;

use crate::model::files::IRQBALANCE_CONFIGS as CONFIG_FILES;
pub(crate) const BAN: &str = "--banmod=mlx5";
/// The most an irqbalance config may hold (a few lines in practice).
pub(crate) const CONFIG_LIMIT: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Status {
    pub(crate) running: bool,
    /// The config file found (or the one a ban would create).
    pub(crate) config: String,
    pub(crate) bans_mlx5: bool,
}

pub(crate) fn status(fs: &FsRoot) -> Status {
    let running = fs
        .list("/proc")
        .iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .any(|pid| fs.read_trimmed(&format!("/proc/{pid}/comm")).as_deref() == Some("irqbalance"));
    let config = CONFIG_FILES
        .iter()
        .find(|f| fs.exists(f))
        .copied()
        .unwrap_or(CONFIG_FILES[0])
        .to_string();
    let text = fs.read(&config).unwrap_or_default();
    let bans_mlx5 = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| l.contains("--banmod=mlx5") || l.contains("-m mlx5") || l.contains("--banmod mlx5"));
    Status {
        running,
        config,
        bans_mlx5,
    }
}

/// Why irqbalance's config cannot be edited safely (its assignment is not one topo-tune can
/// rewrite without changing something else).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct IrqbalanceError(pub(crate) String);

/// The config with `--banmod=mlx5` added to the (last, as the shell reads it) assignment of
/// `IRQBALANCE_ARGS` (or the older `OPTIONS`), everything else byte for byte: other lines,
/// comments, line ends, the value's own quoting and continuation lines. Without an
/// assignment one is appended. A value topo-tune cannot read safely (an unterminated quote)
/// is refused with its line rather than rewritten.
pub(crate) fn with_ban(text: &str) -> Result<String, IrqbalanceError> {
    let Some((start, end, line)) = last_assignment(text) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.\n");
        out.push_str(&format!("IRQBALANCE_ARGS=\"{BAN}\"\n"));
        return Ok(out);
    };
    let value = &text[start..end];
    let edited = match value.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let close = closing_quote(value, q).ok_or_else(|| {
                IrqbalanceError(format!(
                    "line {line}: the value's {q} quote is never closed: not edited"
                ))
            })?;
            let inner = &value[1..close];
            let sep = if inner.trim().is_empty() { "" } else { " " };
            format!("{q}{}{sep}{BAN}{q}{}", inner.trim_end(), &value[close + 1..])
        }
        _ => {
            let word = value
                .split(|c: char| c.is_whitespace() || c == '#')
                .next()
                .unwrap_or("");
            let sep = if word.is_empty() { "" } else { " " };
            format!("\"{word}{sep}{BAN}\"{}", &value[word.len()..])
        }
    };
    Ok(format!("{}{edited}{}", &text[..start], &text[end..]))
}

/// The byte range of the value of the last `IRQBALANCE_ARGS=` (or `OPTIONS=`) assignment
/// that is not a comment — up to the end of its line, or of its last continuation line —
/// and its line number.
fn last_assignment(text: &str) -> Option<(usize, usize, usize)> {
    let mut found = None;
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let here = offset;
        offset += line.len();
        let t = line.trim_start();
        let t = t.strip_prefix("export ").map_or(t, str::trim_start);
        let key = ["IRQBALANCE_ARGS=", "OPTIONS="].into_iter().find(|k| t.starts_with(k));
        let Some(key) = key else { continue };
        let start = here + (line.len() - t.len()) + key.len();
        // The value runs on while a quote is open or the line ends in a backslash.
        let mut end = here + line.trim_end_matches(['\n', '\r']).len();
        while continues(&text[start..end]) {
            match lines.next() {
                Some((_, next)) => {
                    end = offset + next.trim_end_matches(['\n', '\r']).len();
                    offset += next.len();
                }
                None => break,
            }
        }
        found = Some((start, end, i + 1));
    }
    found
}

/// Does a value go on past this point (an open quote, or a trailing backslash)?
fn continues(value: &str) -> bool {
    match value.chars().next() {
        Some(q @ ('"' | '\'')) => closing_quote(value, q).is_none(),
        _ => value.ends_with('\\'),
    }
}

/// The byte index of the quote that closes `value`'s opening quote `q`.
fn closing_quote(value: &str, q: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in value.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' && q == '"' {
            escaped = true;
        } else if c == q {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ban_is_added_once_to_existing_args() {
        assert_eq!(
            with_ban("#IRQBALANCE_ONESHOT=\nIRQBALANCE_ARGS=\"--policyscript=/x\"\n").unwrap(),
            "#IRQBALANCE_ONESHOT=\nIRQBALANCE_ARGS=\"--policyscript=/x --banmod=mlx5\"\n"
        );
        assert_eq!(with_ban("").unwrap(), "# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.\nIRQBALANCE_ARGS=\"--banmod=mlx5\"\n");
    }

    #[test]
    fn only_the_assignment_changes_byte_for_byte() {
        // CRLF lines, a single-quoted value, an argument continued on the next line, and an
        // earlier assignment the shell overrides.
        let text = "# ops\r\nIRQBALANCE_ARGS=\"--old\"\r\nIRQBALANCE_ONESHOT=yes\r\nIRQBALANCE_ARGS='--hintpolicy=subset \\\n  --policyscript=/etc/x.sh'  # tuned\r\nTAIL=1";
        let out = with_ban(text).unwrap();
        assert_eq!(
            out,
            "# ops\r\nIRQBALANCE_ARGS=\"--old\"\r\nIRQBALANCE_ONESHOT=yes\r\nIRQBALANCE_ARGS='--hintpolicy=subset \\\n  --policyscript=/etc/x.sh --banmod=mlx5'  # tuned\r\nTAIL=1"
        );
        assert_eq!(
            with_ban("IRQBALANCE_ARGS=--foo # c\n").unwrap(),
            "IRQBALANCE_ARGS=\"--foo --banmod=mlx5\" # c\n"
        );
        assert!(with_ban("IRQBALANCE_ARGS=\"--never-closed\n").is_err());
        assert_eq!(with_ban("A=1").unwrap(), "A=1\n# Added by topo-tune irq-pin --irqbalance ban: keep irqbalance off mlx5 interrupts.\nIRQBALANCE_ARGS=\"--banmod=mlx5\"\n");
    }
}
