//! Host ranges as pdsh and Slurm write them: `gpu[001-128]`, `gpu[1-4,7]`, `r[1-2]-n[01-04]`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostlistError {
    #[error("`{0}`: unbalanced brackets")]
    Brackets(String),
    #[error("`{0}`: bad range `{1}` (expected N, N-M or a comma list of them)")]
    Range(String, String),
    #[error("`{0}` expands to more than {1} hosts")]
    TooMany(String, usize),
}

/// Expansion stops here: a typo like `gpu[1-99999999]` must not eat the machine.
pub(crate) const MAX_HOSTS: usize = 100_000;

/// Expand a host pattern; a name without brackets is itself.
pub(crate) fn expand(pattern: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = vec![String::new()];
    let mut rest = pattern;
    while !rest.is_empty() {
        match rest.find('[') {
            None => {
                if rest.contains(']') {
                    return Err(HostlistError::Brackets(pattern.into()));
                }
                out.iter_mut().for_each(|h| h.push_str(rest));
                break;
            }
            Some(open) => {
                let literal = &rest[..open];
                if literal.contains(']') {
                    return Err(HostlistError::Brackets(pattern.into()));
                }
                let close = rest[open..]
                    .find(']')
                    .map(|c| c + open)
                    .ok_or_else(|| HostlistError::Brackets(pattern.into()))?;
                let inner = &rest[open + 1..close];
                if inner.contains('[') {
                    return Err(HostlistError::Brackets(pattern.into()));
                }
                let items = range_items(pattern, inner)?;
                if out.len().saturating_mul(items.len()) > MAX_HOSTS {
                    return Err(HostlistError::TooMany(pattern.into(), MAX_HOSTS));
                }
                out = out
                    .iter()
                    .flat_map(|h| items.iter().map(move |i| format!("{h}{literal}{i}")))
                    .collect();
                rest = &rest[close + 1..];
            }
        }
    }
    Ok(out)
}

fn range_items(pattern: &str, inner: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |part: &str| HostlistError::Range(pattern.into(), part.into());
    let mut items = Vec::new();
    for part in inner.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(bad(part));
        }
        let (a, b): (u64, u64) = (lo.parse().map_err(|_| bad(part))?, hi.parse().map_err(|_| bad(part))?);
        if a > b {
            return Err(bad(part));
        }
        if (b - a) as usize + items.len() >= MAX_HOSTS {
            return Err(HostlistError::TooMany(pattern.into(), MAX_HOSTS));
        }
        // Zero padding follows the lower bound's width, as pdsh does (`[001-128]`).
        let width = if lo.len() > 1 && lo.starts_with('0') {
            lo.len()
        } else {
            0
        };
        items.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pdsh_forms() {
        assert_eq!(expand("gpu001").unwrap(), vec!["gpu001"]);
        assert_eq!(expand("gpu[001-003]").unwrap(), vec!["gpu001", "gpu002", "gpu003"]);
        assert_eq!(expand("gpu[1-2,7]").unwrap(), vec!["gpu1", "gpu2", "gpu7"]);
        assert_eq!(
            expand("r[1-2]-n[01-02]").unwrap(),
            vec!["r1-n01", "r1-n02", "r2-n01", "r2-n02"]
        );
        assert_eq!(expand("gpu[9-11]").unwrap(), vec!["gpu9", "gpu10", "gpu11"]);
        assert_eq!(expand("gpu[001-128]").unwrap().len(), 128);
    }

    #[test]
    fn bad_patterns() {
        for bad in [
            "gpu[1-",
            "gpu1]",
            "gpu[[1]]",
            "gpu[a-b]",
            "gpu[3-1]",
            "gpu[]",
            "gpu[1-99999999]",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,30}") { let _ = expand(&s); }

        #[test]
        fn count_is_product(a in 0u32..50, n in 1u32..20, b in 0u32..5, m in 1u32..5) {
            let pattern = format!("x[{a}-{}]y[{b}-{}]", a + n - 1, b + m - 1);
            prop_assert_eq!(expand(&pattern).unwrap().len(), (n * m) as usize);
        }
    }
}
