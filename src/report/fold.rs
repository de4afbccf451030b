//! Output folded the way `dshbak -c` and `clush -b` fold it: a row (or line) that is the same
//! on many nodes is shown once, under their host range (`p5en-[01-08]`); a node that differs
//! shows its own row beside them. `--per-node` keeps one row per node.

use std::collections::HashMap;

/// How rows about nodes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// Equal rows once, under the range of their hosts.
    Folded,
    /// One row per node, as each node answered.
    PerNode,
}

impl View {
    pub(crate) fn of(per_node: bool) -> View {
        if per_node {
            View::PerNode
        } else {
            View::Folded
        }
    }
}

/// `(host, cells)` rows as table rows `[hosts, cells…]`: folded, each distinct row once (in the
/// order it first appears) under the range of the hosts that have it; per node, as given.
pub(crate) fn rows<'a>(items: impl IntoIterator<Item = (&'a str, Vec<String>)>, view: View) -> Vec<Vec<String>> {
    folded(items, view)
        .into_iter()
        .map(|(hosts, cells)| std::iter::once(hosts).chain(cells).collect())
        .collect()
}

/// `(host, text)` pairs as `(hosts, text)`: each distinct text once under its hosts' range
/// (folded), or one per pair (per node).
pub(crate) fn lines<'a>(items: impl IntoIterator<Item = (&'a str, String)>, view: View) -> Vec<(String, String)> {
    folded(items, view)
}

fn folded<'a, K: Eq + std::hash::Hash + Clone>(
    items: impl IntoIterator<Item = (&'a str, K)>,
    view: View,
) -> Vec<(String, K)> {
    if view == View::PerNode {
        return items.into_iter().map(|(h, k)| (h.to_string(), k)).collect();
    }
    let mut at: HashMap<K, usize> = HashMap::new();
    let mut groups: Vec<(Vec<String>, K)> = Vec::new();
    for (host, key) in items {
        match at.get(&key) {
            Some(&i) => groups[i].0.push(host.to_string()),
            None => {
                at.insert(key.clone(), groups.len());
                groups.push((vec![host.to_string()], key));
            }
        }
    }
    groups
        .into_iter()
        .map(|(hosts, key)| (crate::emit::slurm::compress(&hosts), key))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn equal_rows_fold_under_a_range_and_a_different_one_stands_apart() {
        let items = vec![
            ("gpu01", cells(&["ib", "pass"])),
            ("gpu01", cells(&["gdr", "pass"])),
            ("gpu02", cells(&["ib", "FAIL"])),
            ("gpu02", cells(&["gdr", "pass"])),
            ("gpu03", cells(&["ib", "pass"])),
            ("gpu03", cells(&["gdr", "pass"])),
        ];
        assert_eq!(
            rows(items.clone(), View::Folded),
            [
                cells(&["gpu[01,03]", "ib", "pass"]),
                cells(&["gpu[01-03]", "gdr", "pass"]),
                cells(&["gpu02", "ib", "FAIL"]),
            ]
        );
        assert_eq!(rows(items, View::PerNode).len(), 6);
    }

    #[test]
    fn lines_fold_too() {
        let l = lines(
            [("a1", "x".to_string()), ("a2", "x".to_string()), ("b", "y".to_string())],
            View::Folded,
        );
        assert_eq!(
            l,
            [
                ("a[1-2]".to_string(), "x".to_string()),
                ("b".to_string(), "y".to_string())
            ]
        );
    }
}
