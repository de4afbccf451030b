//! Plans into bytes: launcher files and NCCL's graph XML. Pure functions, golden-tested.

pub(crate) mod graph_xml;
pub(crate) mod k8s;
pub(crate) mod launch;
pub(crate) mod slurm;
pub(crate) mod topo_xml;

/// Text made safe for one `# …` comment line of a file a shell, Slurm or YAML reads: every
/// control character (a newline would start a line of its own: a command in
/// `k8s-label-nodes.sh`, a switch in `topology.conf`) written as the text of its escape.
pub(crate) fn comment_text(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let shown: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            shown
        })
        .collect()
}

/// Text made safe inside an XML attribute value: `&`, `<`, `>`, `"`, `'` as entities, and
/// characters XML 1.0 cannot hold dropped. Every value that did not come from topo-tune
/// itself goes through here.
pub(crate) fn xml_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn attribute_values_cannot_leave_their_quotes() {
        assert_eq!(super::xml_attr("x86_64\" evil=\"1"), "x86_64&quot; evil=&quot;1");
        assert_eq!(super::xml_attr("x86<64&"), "x86&lt;64&amp;");
        assert!(!super::xml_attr("a\u{1}b").chars().any(char::is_control));
    }
}
