//! NCCL's config-file dialect (`setEnvFile`, src/misc/param.cc): `NAME=VALUE` per line, split
//! at the first `=`, no trimming, no quotes, `#` comment lines only from 2.26, first value wins.
//! topo-tune keeps drop-ins (`/etc/nccl/conf.d/NN-name.conf`, later file wins) and assembles
//! the one file NCCL reads, with each key once.

use super::table::{validate, Rejection};
use crate::model::{NcclVersion, Setting};
use std::collections::BTreeMap;

/// Comment lines are skipped from this version on; before it they define junk variables.
pub(crate) const COMMENTS_SINCE: NcclVersion = NcclVersion(2, 26, 0);

fn comments_allowed(version: Option<NcclVersion>) -> bool {
    version.is_some_and(|v| v >= COMMENTS_SINCE)
}

/// Render settings as a drop-in (sorted by name; a header comment only where NCCL skips it).
pub(crate) fn render(settings: &[Setting], version: Option<NcclVersion>, header: &str) -> Result<String, Rejection> {
    let mut out = String::new();
    if comments_allowed(version) && !header.is_empty() {
        for line in header.lines() {
            out.push_str(&format!("# {line}\n"));
        }
    }
    let mut sorted: Vec<&Setting> = settings.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for s in sorted {
        validate(&s.name, &s.value, version)?;
        out.push_str(&format!("{}={}\n", s.name, s.value));
    }
    Ok(out)
}

/// One variable a config file sets, as NCCL's `setEnvFile` reads it, with its line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfLine {
    pub(crate) line: usize,
    pub(crate) name: String,
    pub(crate) value: String,
}

/// `fgets` into a 4,096-byte buffer: a longer line is read as several.
const FGETS_BYTES: usize = 4096;
/// `envVar` and `envValue` are 1,024 bytes: a longer name or value is cut to 1,023.
const PART_BYTES: usize = 1023;

/// Every `NAME=VALUE` of a file, exactly as NCCL's `setEnvFile` reads it (src/misc/param.cc:27-50,
/// NVIDIA/nccl 5067397c): `fgets` of at most 4,095 bytes (a longer line continues as the next
/// one), the line a C string (it ends at a NUL), one trailing `\n` then one `\r` removed, a `#`
/// in the first column skips the line, no `=` skips it, the name is everything before the first
/// `=` (spaces, `export` and all) and the value everything after it (quotes and all), each cut
/// to 1,023 bytes. Order is kept: NCCL sets each with `setenv(…, 0)`, so the first wins.
pub(crate) fn read_lines(text: &str) -> Vec<ConfLine> {
    let mut out = Vec::new();
    for (i, physical) in text.as_bytes().split_inclusive(|b| *b == b'\n').enumerate() {
        for piece in physical.chunks(FGETS_BYTES - 1) {
            if let Some((name, value)) = set_env_line(piece) {
                out.push(ConfLine {
                    line: i + 1,
                    name,
                    value,
                });
            }
        }
    }
    out
}

fn set_env_line(piece: &[u8]) -> Option<(String, String)> {
    let mut line = &piece[..piece.iter().position(|b| *b == 0).unwrap_or(piece.len())];
    line = line.strip_suffix(b"\n").unwrap_or(line);
    line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.first() == Some(&b'#') {
        return None;
    }
    let eq = line.iter().position(|b| *b == b'=')?;
    let name = &line[..eq.min(PART_BYTES)];
    let value = &line[eq + 1..];
    let value = &value[..value.len().min(PART_BYTES)];
    Some((
        String::from_utf8_lossy(name).into_owned(),
        String::from_utf8_lossy(value).into_owned(),
    ))
}

/// Read a file as NCCL does ([`read_lines`]), the first occurrence of a name winning.
pub(crate) fn parse(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for l in read_lines(text) {
        if seen.insert(l.name.clone()) {
            out.push((l.name, l.value));
        }
    }
    out
}

/// Assemble drop-ins (name, content) into `/etc/nccl.conf`: lexical file order, a later file
/// overrides an earlier one, each key once (sorted), every pair validated. Returns the file
/// and, per key, the drop-in it came from.
pub(crate) fn assemble(
    dropins: &[(String, String)],
    version: Option<NcclVersion>,
    header: &str,
) -> Result<(String, BTreeMap<String, String>), Rejection> {
    let mut files: Vec<&(String, String)> = dropins.iter().collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut merged: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (file, content) in files {
        for (name, value) in parse(content) {
            merged.insert(name, (value, file.clone()));
        }
    }
    let settings: Vec<Setting> = merged
        .iter()
        .map(|(n, (v, f))| Setting {
            name: n.clone(),
            value: v.clone(),
            reason: f.clone(),
        })
        .collect();
    let text = render(&settings, version, header)?;
    Ok((text, merged.into_iter().map(|(n, (_, f))| (n, f)).collect()))
}

/// A job environment file for containers (`docker --env-file`, Kubernetes env): containers
/// never see the host's `/etc/nccl.conf`. Same `NAME=VALUE` syntax, no comments.
pub(crate) fn env_file(settings: &[(String, String)]) -> String {
    settings.iter().map(|(n, v)| format!("{n}={v}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(n: &str, v: &str) -> Setting {
        Setting {
            name: n.into(),
            value: v.into(),
            reason: String::new(),
        }
    }

    #[test]
    fn lines_are_read_as_set_env_file_reads_them() {
        let long = format!("NCCL_A={}NCCL_B=2\n", "x".repeat(4095 - 7));
        let text = format!("# NCCL_X=1\n  # NCCL_Y=1\nexport NCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE = 1\nNCCL_IB_DISABLE=\"1\"\nNCCL_C=1\r\nNCCL_D=1\0junk\nno equals\nNCCL_E==x\n{long}");
        let got: Vec<(usize, String, String)> = read_lines(&text)
            .into_iter()
            .map(|l| (l.line, l.name, l.value))
            .collect();
        let want = [
            (2, "  # NCCL_Y", "1"),
            (3, "export NCCL_P2P_DISABLE", "1"),
            (4, "NCCL_SHM_DISABLE ", " 1"),
            (5, "NCCL_IB_DISABLE", "\"1\""),
            (6, "NCCL_C", "1"),
            (7, "NCCL_D", "1"),
            (9, "NCCL_E", "=x"),
            (10, "NCCL_A", &"x".repeat(1023)),
            (10, "NCCL_B", "2"),
        ];
        let want: Vec<(usize, String, String)> = want
            .iter()
            .map(|(l, n, v)| (*l, n.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn golden_dropin_and_assembly() {
        let old = Some(NcclVersion(2, 21, 5));
        let new = Some(NcclVersion(2, 28, 9));
        let settings = [s("NCCL_SOCKET_IFNAME", "=eth0"), s("NCCL_IB_HCA", "=mlx5_0,mlx5_1")];
        assert_eq!(
            render(&settings, old, "managed by topo-tune").unwrap(),
            "NCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME==eth0\n"
        );
        assert_eq!(
            render(&settings, new, "managed by topo-tune").unwrap(),
            "# managed by topo-tune\nNCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME==eth0\n"
        );
        let dropins = vec![
            (
                "50-topo-tune.conf".to_string(),
                "NCCL_IB_HCA==mlx5_0\nNCCL_CROSS_NIC=0\n".to_string(),
            ),
            (
                "00-preserved.conf".to_string(),
                "NCCL_DEBUG=WARN\nNCCL_CROSS_NIC=1\n".to_string(),
            ),
            (
                "90-site.conf".to_string(),
                "# site override\nNCCL_IB_HCA==mlx5_2\n".to_string(),
            ),
        ];
        let (text, from) = assemble(&dropins, old, "x").unwrap();
        assert_eq!(text, "NCCL_CROSS_NIC=0\nNCCL_DEBUG=WARN\nNCCL_IB_HCA==mlx5_2\n");
        assert_eq!(from["NCCL_IB_HCA"], "90-site.conf");
        assert_eq!(from["NCCL_CROSS_NIC"], "50-topo-tune.conf");
        // A bad preserved line refuses the whole assembly instead of shipping it.
        let bad = vec![(
            "00-preserved.conf".to_string(),
            "NCCL_SOCKET_IFNAME = eth0\n".to_string(),
        )];
        assert!(assemble(&bad, old, "").is_err());
    }

    fn accepted_setting() -> impl Strategy<Value = Setting> {
        prop_oneof![
            "[a-z]{2,6}[0-9]{0,2}".prop_map(|v| s("NCCL_SOCKET_IFNAME", &format!("={v}"))),
            proptest::collection::vec("mlx5_[0-9]{1,2}", 1..4)
                .prop_map(|v| s("NCCL_IB_HCA", &format!("={}", v.join(",")))),
            (0i64..=31).prop_map(|n| s("NCCL_IB_TIMEOUT", &n.to_string())),
            (-1i64..=255).prop_map(|n| s("NCCL_IB_GID_INDEX", &n.to_string())),
            prop::sample::select(vec!["0", "1", "2"]).prop_map(|v| s("NCCL_CROSS_NIC", v)),
            // Components never start with `.`, so `..` (refused by the validator) cannot appear.
            "/[a-z]{1,8}(/[a-z0-9_-][a-z0-9._-]{0,7}){0,3}".prop_map(|p| s("NCCL_TOPO_FILE", &p)),
        ]
    }

    proptest! {
        #[test]
        fn emit_parse_emit_is_stable(settings in proptest::collection::vec(accepted_setting(), 0..8), minor in 18u32..31) {
            let version = Some(NcclVersion(2, minor, 0));
            // Keep one value per name, as an assembled file does.
            let mut unique: Vec<Setting> = Vec::new();
            for st in settings {
                if !unique.iter().any(|u| u.name == st.name) {
                    unique.push(st);
                }
            }
            let text = render(&unique, version, "managed by topo-tune").unwrap();
            let back: Vec<Setting> = parse(&text).into_iter().map(|(n, v)| s(&n, &v)).collect();
            prop_assert_eq!(render(&back, version, "managed by topo-tune").unwrap(), text.clone());
            for line in text.lines() {
                prop_assert!(!line.chars().any(char::is_whitespace) || line.starts_with("# "), "{}", line);
                prop_assert!(!line.contains('"') && !line.contains('\''));
                prop_assert!(!line.starts_with('#') || minor >= 26, "no comment lines before 2.26: {}", line);
            }
        }
    }
}
