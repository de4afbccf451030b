//! What a hostname, user, label or path may contain. Everything that reaches an `ssh` command
//! line is checked here first, so no value can smuggle shell syntax or an ssh option.

/// Why a name cannot be one: what it holds that the grammar does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NameError(pub(crate) String);

impl From<NameError> for String {
    fn from(e: NameError) -> String {
        e.0
    }
}

/// A hostname or ssh alias (dot-separated labels of letters, digits, `-`, `_`, each 1 to 63
/// characters, none starting with `-`), an IPv4 address, or a bracket-less IPv6 literal. So
/// no host can be read as an ssh option, carry shell syntax, or name a directory (`.`, `..`)
/// when it becomes a path under `--output-dir`.
pub(crate) fn check_host(host: &str) -> Result<(), NameError> {
    if host.is_empty() || host.len() > 253 {
        return Err(NameError("a host must be 1 to 253 characters".into()));
    }
    if host.starts_with('-') {
        return Err(NameError(
            "a host must not start with `-` (ssh would read it as an option)".into(),
        ));
    }
    if let Some(c) = host
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')))
    {
        return Err(NameError(format!(
            "`{}` is not allowed in a host name (letters, digits, `.`, `-`, `_`, `:` only)",
            c.escape_default()
        )));
    }
    if host.contains(':') {
        // An IPv6 literal: hex digits, `:` and (IPv4-mapped) `.` only.
        return if host.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.') {
            Ok(())
        } else {
            Err(NameError(
                "a host with `:` must be an IPv6 address (hex digits, `:`, `.`)".into(),
            ))
        };
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err(NameError(
                "a host name is dot-separated labels: none may be empty (`.`, `..`, `a..b`, a trailing `.`)".into(),
            ));
        }
        if label.len() > 63 || label.starts_with('-') {
            return Err(NameError(format!(
                "`{label}`: a host name label is 1 to 63 characters and does not start with `-`"
            )));
        }
    }
    Ok(())
}

/// Letters, digits, `.`, `-`, `_`; 1 to `max` characters; no leading `-`.
fn plain_name(text: &str, max: usize, what: &str) -> Result<(), NameError> {
    let ok = !text.is_empty()
        && text.len() <= max
        && !text.starts_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(NameError(format!(
            "`{}` is not a valid {what} (letters, digits, `.`, `-`, `_`; 1 to {max} characters)",
            text.escape_default()
        )))
    }
}

pub(crate) fn check_user(user: &str) -> Result<(), NameError> {
    plain_name(user, 32, "user name")
}

/// Label keys and values: `rack-1`, `leaf_3`, `rail.0`.
pub(crate) fn check_label(text: &str) -> Result<(), NameError> {
    plain_name(text, 63, "label")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injection_is_refused() {
        for bad in [
            "a;rm -rf /",
            "$(reboot)",
            "`id`",
            "a b",
            "-oProxyCommand=x",
            "a|b",
            "a&b",
            "a\nb",
            "",
            "x'y",
            "a\"b",
            "a>b",
            ".",
            "..",
            "a..b",
            "node.",
            "../etc",
            "a/b",
            "fe80::1;x",
        ] {
            assert!(check_host(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "gpu001",
            "node-7.rack-1.example.com",
            "127.0.0.1",
            "fe80::1",
            "login_alias",
        ] {
            assert!(check_host(ok).is_ok(), "{ok}");
        }
        assert!(check_label("rack-1").is_ok());
        assert!(check_label("$(x)").is_err());
        assert!(check_user("root").is_ok());
        assert!(check_user("-x").is_err());
    }
}
