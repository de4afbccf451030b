//! The fabric as the wires report it: `ibnetdiscover` captures (`ibnet`), AWS's instance
//! topology (`aws`), what they say of levels, rails and faults (`derive`), and the
//! cluster.yaml section that states it (`section`). Pure: text in, values and text out.

pub(crate) mod aws;
pub(crate) mod compare;
pub(crate) mod derive;
pub(crate) mod ibnet;
pub(crate) mod planes;
pub(crate) mod section;

/// A GUID map's lines (`0x<guid> "name"` as opensm's node-name map writes it, or `H-<guid>
/// name`, or `<guid> name`): node GUID (16 hex digits, lower case) → host name. `#` starts a
/// comment; a line that is none of these is refused with its number.
pub(crate) fn guid_map(text: &str) -> Result<std::collections::HashMap<String, String>, ibnet::ParseError> {
    let mut out = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or_default().trim();
        if t.is_empty() {
            continue;
        }
        let bad = |m: &str| ibnet::ParseError {
            line: i + 1,
            message: m.to_string(),
        };
        let (guid, name) = t
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("a GUID and a host name"))?;
        let guid = guid
            .trim_start_matches("H-")
            .trim_start_matches("0x")
            .to_ascii_lowercase();
        let guid = format!("{guid:0>16}");
        if guid.len() != 16 || !guid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the GUID is not 16 hex digits"));
        }
        let name = name
            .trim()
            .trim_matches('"')
            .split_whitespace()
            .next()
            .unwrap_or_default();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(bad("the host name is not letters, digits, `-`, `_` and `.`"));
        }
        out.insert(guid, name.to_string());
    }
    Ok(out)
}

/// A host map's lines (`<instance-id> <hostname>`, `#` comments): AWS instance id → host name.
/// An id or a host listed twice, or a name that is not one host name, is refused with its line.
pub(crate) fn host_map(text: &str) -> Result<std::collections::HashMap<String, String>, ibnet::ParseError> {
    let mut out = std::collections::HashMap::new();
    let mut hosts = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or_default().trim();
        if t.is_empty() {
            continue;
        }
        let bad = |m: String| ibnet::ParseError {
            line: i + 1,
            message: m,
        };
        let words: Vec<&str> = t.split_whitespace().collect();
        let [id, host] = words.as_slice() else {
            return Err(bad("an instance id and a host name".into()));
        };
        let plain = |s: &str| s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !id.starts_with("i-") || !plain(id) {
            return Err(bad(format!("{id:?} is not an instance id (i-…)")));
        }
        if crate::model::snapshot_check::host_name(host).is_err() {
            return Err(bad(format!("{host:?} is not a host name")));
        }
        if out.insert(id.to_string(), host.to_string()).is_some() {
            return Err(bad(format!("{id} is mapped twice")));
        }
        if !hosts.insert(host.to_string()) {
            return Err(bad(format!("{host} is given to two instances")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_host_map_is_read_and_its_bad_lines_named() {
        let m = host_map("# site map\ni-0ad3df7a6c3e2c0cd gpu-01  # rack 1\n\ni-09da5708a8a8e82da gpu-02\n").unwrap();
        assert_eq!(m["i-0ad3df7a6c3e2c0cd"], "gpu-01");
        assert_eq!(m.len(), 2);
        for (text, line, want) in [
            ("i-1 a\ni-1 b\n", 2, "mapped twice"),
            ("i-1 a\ni-2 a\n", 2, "two instances"),
            ("i-1\n", 1, "an instance id and a host name"),
            ("x-1 a\n", 1, "not an instance id"),
            ("i-1 gpu[1-3]\n", 1, "not a host name"),
            ("i-1 a b\n", 1, "an instance id and a host name"),
        ] {
            let e = host_map(text).unwrap_err();
            assert_eq!(e.line, line, "{text}");
            assert!(e.message.contains(want), "{text}: {}", e.message);
        }
    }

    proptest! {
        /// Whatever the text, a host map is read or refused with a line, never a panic; what is
        /// read maps only plain ids to plain host names.
        #[test]
        fn any_host_map_text_is_read_or_refused(text in "(\\PC|\t|\n){0,300}") {
            if let Ok(m) = host_map(&text) {
                for (id, host) in &m {
                    prop_assert!(id.starts_with("i-"));
                    prop_assert!(crate::model::snapshot_check::host_name(host).is_ok());
                }
            }
        }
    }
}
