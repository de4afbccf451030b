//! What topo-tune knows of an XML document before any parser reads it: which kind it is (by
//! its root element) and whether it nests deeper than a parser's stack allows. Shared by the
//! hwloc and NCCL topology readers.

/// What an XML file holds, by its root element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum XmlKind {
    /// `<topology>`: an hwloc export.
    Hwloc,
    /// `<system>`: an NCCL topology file.
    NcclTopology,
    /// `<graphs>`: an NCCL graph file (rings and trees), not hardware.
    NcclGraph,
    Other(String),
}

/// The name of the first element, skipping the declaration, comments and doctype.
pub(crate) fn kind_of(text: &str) -> XmlKind {
    let mut rest = text;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if let Some(comment) = rest.strip_prefix("!--") {
            // A comment may hold markup-like text: skip it whole.
            rest = comment.find("-->").map_or("", |end| &comment[end + 3..]);
            continue;
        }
        if rest.starts_with('?') || rest.starts_with('!') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        return match name.as_str() {
            "topology" => XmlKind::Hwloc,
            "system" => XmlKind::NcclTopology,
            "graphs" => XmlKind::NcclGraph,
            _ => XmlKind::Other(name),
        };
    }
    XmlKind::Other(String::new())
}

/// How deep elements nest, by a linear scan that stops past `limit` — before any parser
/// recurses into the document (a few thousand levels overflow a recursive parser's stack).
pub(crate) fn nesting_exceeds(text: &str, limit: usize) -> bool {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(b'?' | b'!') => {}
            Some(_) => depth += 1,
            None => break,
        }
        // To the end of the tag, skipping quoted attribute values.
        let mut quote: Option<u8> = None;
        i += 1;
        while i < b.len() {
            match (quote, b[i]) {
                (Some(q), c) if c == q => quote = None,
                (None, c @ (b'"' | b'\'')) => quote = Some(c),
                (None, b'>') => break,
                _ => {}
            }
            i += 1;
        }
        if i > 0 && b.get(i - 1) == Some(&b'/') && quote.is_none() {
            depth = depth.saturating_sub(1);
        }
        if depth > limit {
            return true;
        }
        i += 1;
    }
    false
}
