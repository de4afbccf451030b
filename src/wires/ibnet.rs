//! `ibnetdiscover`'s plain output, read as infiniband-diags writes it (ibnetdiscover(8); the
//! captures under tests/data/fabric/): node blocks of `vendid=`/`devid=`/`sysimgguid=`/
//! `switchguid=`|`caguid=` headers, a `Switch N "S-<guid>"  # "desc" … lid L` or
//! `Ca N "H-<guid>"  # "desc"` line, then one line per cabled port:
//!
//! ```text
//! [1]    "H-e09d7303007a4bd8"[1](e09d7303007a4bd8)         # "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
//! [1](e09d7303007a5a68)     "S-2c5eab0300b87b40"[17]        # lid 657 lmc 0 "MF0;A09-…" lid 73 4xNDR
//! ```
//!
//! (a switch's port: the peer, its port, its port GUID for a CA, the peer's description, its
//! LID, the link's width and speed; a CA's port: its own port GUID, the switch and port, the
//! CA port's own LID, the switch's description and LID, the link). Tabs may have become
//! spaces (a terminal log): fields are found by their shapes, not by tab positions. A line
//! that is none of these is refused with its number; so is a capture with no node in it.

use std::fmt;

/// The most a capture may hold (a 10,000-port fabric is a few MB), lines, and nodes.
pub(crate) const MAX_BYTES: usize = 64 << 20;
pub(crate) const MAX_LINE: usize = 4096;
pub(crate) const MAX_NODES: usize = 200_000;
/// A switch has at most this many ports (the largest ASICs have 129 with the management port).
pub(crate) const MAX_PORTS: u32 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Switch,
    Ca,
    Router,
}

/// One node of the capture and its cabled ports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    /// `S-2c5eab0300b87b40`, `H-e09d7303007a5a68`: how peers name it.
    pub(crate) id: String,
    pub(crate) ports: u32,
    /// Its node description (`MF0;A09-P1-IBLEAF-04-04:MQM9701/U1`, `a08-p1-dgx-04-c17 mlx5_5`).
    pub(crate) desc: String,
    pub(crate) lid: Option<u32>,
    /// The line of its `Switch`/`Ca` header (1-based).
    pub(crate) line: usize,
    pub(crate) links: Vec<Link>,
}

/// One cabled port, as its node's block lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    pub(crate) port: u32,
    pub(crate) peer: String,
    pub(crate) peer_port: u32,
    /// The peer's description, where the line gives it.
    pub(crate) peer_desc: Option<String>,
    /// The LID of the CA end (a switch line: the peer CA's; a CA line: its own), `None`
    /// where unset (0, 65535).
    pub(crate) ca_lid: Option<u32>,
    /// `4x`, `NDR`: as the line writes them (`None` where the line gives no link).
    pub(crate) width: Option<u32>,
    pub(crate) speed: Option<String>,
    pub(crate) line: usize,
}

/// Why a capture cannot be read; every variant names its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

fn bad(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Every node of a capture, in the order it lists them.
pub(crate) fn parse(text: &str) -> Result<Vec<Node>, ParseError> {
    if text.len() > MAX_BYTES {
        return Err(bad(0, format!("{} bytes, more than {MAX_BYTES}: refused", text.len())));
    }
    let mut nodes: Vec<Node> = Vec::new();
    // ibnetdiscover lists each node once: a node twice is two captures pasted together.
    let mut first_line: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    // A terminal log may end lines with CR LF, or (a log whose lines hold only carriage
    // returns) with CR alone: read either. A lone CR in a file of LF lines is ambiguous
    // (mangled, or two logs pasted together) and refused below.
    let end = if !text.contains('\n') && text.contains('\r') {
        '\r'
    } else {
        '\n'
    };
    for (i, raw) in text.split(end).enumerate() {
        let n = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.len() > MAX_LINE {
            return Err(bad(n, format!("{} bytes, more than {MAX_LINE}", line.len())));
        }
        if line.contains('\r') {
            return Err(bad(
                n,
                "a carriage return inside the line: the capture was mangled (a terminal log?)",
            ));
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || header(t) {
            continue;
        }
        if let Some(node) = node_line(t, n)? {
            if nodes.len() >= MAX_NODES {
                return Err(bad(n, format!("more than {MAX_NODES} nodes: refused")));
            }
            if let Some(first) = first_line.insert(node.id.clone(), n) {
                return Err(bad(
                    n,
                    format!(
                        "{} is listed again (first at line {first}): two captures in one file?",
                        node.id
                    ),
                ));
            }
            nodes.push(node);
            continue;
        }
        if t.starts_with('[') {
            let Some(node) = nodes.last_mut() else {
                return Err(bad(n, "a port line before any Switch or Ca line"));
            };
            if node.links.len() as u32 >= node.ports.max(1) {
                return Err(bad(
                    n,
                    format!("more ports listed than the {} the node has", node.ports),
                ));
            }
            let link = port_line(t, n, node.kind)?;
            node.links.push(link);
            continue;
        }
        return Err(bad(n, format!("not a line ibnetdiscover writes: {:?}", shown(t))));
    }
    if nodes.is_empty() {
        return Err(bad(0, "no Switch or Ca line: not an ibnetdiscover capture"));
    }
    Ok(nodes)
}

/// A line cut for a message, control characters escaped.
fn shown(t: &str) -> String {
    t.chars().take(80).flat_map(char::escape_debug).collect()
}

/// `vendid=0x2c9`, `devid=…`, `sysimgguid=…`, `switchguid=…(…)`, `caguid=…`, `rtguid=…`;
/// and what `ibnetdiscover -g` adds between blocks (infiniband-diags' `dump_topology`):
/// `Chassis 3 (guid 0x…)`, `Non-Chassis Nodes`, and Xsigo's `Hostname: …`.
fn header(t: &str) -> bool {
    [
        "vendid=",
        "devid=",
        "sysimgguid=",
        "switchguid=",
        "caguid=",
        "rtguid=",
        "Hostname: ",
    ]
    .iter()
    .any(|h| t.starts_with(h))
        || t == "Non-Chassis Nodes"
        || chassis_line(t)
}

/// `Chassis 3` or `Chassis 3 (guid 0x2c90200448ec8)`, as `out_chassis` prints it.
fn chassis_line(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("Chassis ") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    digits > 0
        && (tail.is_empty()
            || tail
                .strip_prefix(" (guid 0x")
                .and_then(|g| g.strip_suffix(')'))
                .is_some_and(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_hexdigit())))
}

/// What may follow a port number: `-g`'s external port (`[ext 5]`) and ibdiagnet's port
/// label (`(1/1/1)` on a Quantum-2 switch, `(B9D0F0/0/0/1)` on a CA), skipped.
fn skip_labels(mut s: &str) -> Option<&str> {
    loop {
        let t = s.trim_start();
        if let Some(r) = t.strip_prefix("[ext ") {
            let (n, rest) = r.split_once(']')?;
            n.parse::<u32>().ok()?;
            s = rest;
        } else if let Some(r) = t.strip_prefix('(') {
            let (label, rest) = r.split_once(')')?;
            let ok = label.contains('/') && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'/');
            if !ok {
                return Some(s);
            }
            s = rest;
        } else {
            return Some(s);
        }
    }
}

/// The text between the first pair of double quotes after `from`, and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let start = s.find('"')? + 1;
    let len = s[start..].find('"')?;
    Some((&s[start..start + len], &s[start + len + 1..]))
}

/// `Switch 65 "S-…"  # "desc" enhanced port 0 lid 73 lmc 0`, `Ca 1 "H-…"  # "desc"`.
fn node_line(t: &str, n: usize) -> Result<Option<Node>, ParseError> {
    let (kind, rest) = if let Some(r) = t.strip_prefix("Switch") {
        (Kind::Switch, r)
    } else if let Some(r) = t.strip_prefix("Ca") {
        (Kind::Ca, r)
    } else if let Some(r) = t.strip_prefix("Rt") {
        (Kind::Router, r)
    } else {
        return Ok(None);
    };
    if !rest.starts_with(char::is_whitespace) {
        return Ok(None);
    }
    let rest = rest.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let ports: u32 = digits
        .parse()
        .ok()
        .filter(|p| (1..=MAX_PORTS).contains(p))
        .ok_or_else(|| {
            bad(
                n,
                format!("a port count 1 to {MAX_PORTS} after the node type: {:?}", shown(t)),
            )
        })?;
    let (id, after) = quoted(&rest[digits.len()..]).ok_or_else(|| bad(n, "no quoted node id (\"S-…\" or \"H-…\")"))?;
    node_id(id).ok_or_else(|| {
        bad(
            n,
            format!("node id {:?}: not S-, H- or R- and 16 hex digits", shown(id)),
        )
    })?;
    let comment = after.split_once('#').map(|(_, c)| c).unwrap_or_default();
    let (desc, tail) = quoted(comment).unwrap_or(("", comment));
    Ok(Some(Node {
        kind,
        id: id.to_string(),
        ports,
        desc: desc.to_string(),
        lid: lid_after(tail),
        line: n,
        links: Vec::new(),
    }))
}

/// `S-2c5eab0300b87b40`: a type letter, a dash, 16 hex digits.
fn node_id(id: &str) -> Option<()> {
    let (t, guid) = id.split_once('-')?;
    let ok = matches!(t, "S" | "H" | "R") && guid.len() == 16 && guid.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(())
}

/// `[17]` → 17, and what follows.
fn bracketed(s: &str) -> Option<(u32, &str)> {
    let s = s.strip_prefix('[')?;
    let (num, rest) = s.split_once(']')?;
    let p: u32 = num.parse().ok()?;
    (p <= MAX_PORTS).then_some((p, rest))
}

/// `(e09d7303007a4bd8)` at the start of `s`, skipped: a port GUID, printed without leading
/// zeros (`(2c903002db103)`, 13 digits, in an FDR capture).
fn skip_guid(s: &str) -> Option<&str> {
    match s.strip_prefix('(') {
        None => Some(s),
        Some(r) => {
            let (g, rest) = r.split_once(')')?;
            ((1..=16).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_hexdigit())).then_some(rest)
        }
    }
}

/// A port line of a switch's or a CA's block.
fn port_line(t: &str, n: usize, kind: Kind) -> Result<Link, ParseError> {
    let malformed = || bad(n, format!("not a port line `[p] \"peer\"[q] # …`: {:?}", shown(t)));
    let (port, rest) = bracketed(t).ok_or_else(malformed)?;
    let rest = skip_labels(rest).ok_or_else(malformed)?;
    let rest = skip_guid(rest).ok_or_else(malformed)?;
    let (peer, rest) = quoted(rest).ok_or_else(malformed)?;
    node_id(peer).ok_or_else(|| bad(n, format!("peer {:?}: not S-, H- or R- and 16 hex digits", shown(peer))))?;
    let (peer_port, rest) = bracketed(rest).ok_or_else(malformed)?;
    let rest = skip_labels(rest).ok_or_else(malformed)?;
    let rest = skip_guid(rest.trim_start()).ok_or_else(malformed)?;
    let comment = rest.split_once('#').map(|(_, c)| c.trim()).unwrap_or_default();
    // A switch's line: `"desc" lid L 4xNDR`; a CA's: `lid L lmc M "desc" lid L 4xNDR`.
    let (own_lid, comment) = match kind {
        Kind::Switch => (None, comment),
        _ => match comment.split_once('"') {
            Some((before, _)) => (lid_after(before), &comment[before.len()..]),
            None => (lid_after(comment), comment),
        },
    };
    let (peer_desc, tail) = match quoted(comment) {
        Some((d, tail)) => (Some(d.to_string()), tail),
        None => (None, comment),
    };
    let (width, speed) = link_rate(tail);
    let ca_lid = match kind {
        Kind::Switch if peer.starts_with("H-") => lid_after(tail),
        Kind::Switch => None,
        _ => own_lid,
    };
    Ok(Link {
        port,
        peer: peer.to_string(),
        peer_port,
        peer_desc,
        ca_lid,
        width,
        speed,
        line: n,
    })
}

/// The LID after the first `lid` word; 0 and 65535 (unassigned, permissive) are no LID.
fn lid_after(s: &str) -> Option<u32> {
    let mut words = s.split_whitespace();
    while let Some(w) = words.next() {
        if w == "lid" {
            return words
                .next()
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|l| *l != 0 && *l < 0xffff);
        }
    }
    None
}

/// The link's `4xNDR` (the last word that is a width and a speed).
fn link_rate(s: &str) -> (Option<u32>, Option<String>) {
    for w in s.split_whitespace().rev() {
        if let Some((width, speed)) = w.split_once('x') {
            if let Ok(lanes) = width.parse::<u32>() {
                if matches!(lanes, 1 | 2 | 4 | 8 | 12) && lane_gbps(speed).is_some() {
                    return (Some(lanes), Some(speed.to_string()));
                }
            }
        }
    }
    (None, None)
}

/// Nominal Gb/s per lane of an InfiniBand speed (the IBTA generations as vendors state them).
pub(crate) fn lane_gbps(speed: &str) -> Option<f64> {
    Some(match speed {
        "SDR" => 2.5,
        "DDR" => 5.0,
        "QDR" => 10.0,
        "FDR10" => 10.0,
        "FDR" => 14.0,
        "EDR" => 25.0,
        "HDR" => 50.0,
        "NDR" => 100.0,
        "XDR" => 200.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: &str = "#\n# Topology file: generated on Wed Aug  6 16:11:23 2025\n#\n\nvendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x2c5eab0300b87b40\nswitchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)\nSwitch\t65 \"S-2c5eab0300b87b40\"\t\t# \"MF0;A09-P1-IBLEAF-04-04:MQM9701/U1\" enhanced port 0 lid 73 lmc 0\n[1]\t\"H-e09d7303007a4bd8\"[1](e09d7303007a4bd8) \t\t# \"a08-p1-dgx-04-c01 mlx5_5\" lid 647 4xNDR\n[35]\t\"S-2c5eab0300c26280\"[32]\t\t# \"MF0;A10-P1-IBSPINE-02:MQM9701/U1\" lid 236 4xNDR\n\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0xe09d7303007a4bd8\ncaguid=0xe09d7303007a4bd8\nCa\t1 \"H-e09d7303007a4bd8\"\t\t# \"a08-p1-dgx-04-c01 mlx5_5\"\n[1](e09d7303007a4bd8) \t\"S-2c5eab0300b87b40\"[1]\t\t# lid 647 lmc 0 \"MF0;A09-P1-IBLEAF-04-04:MQM9701/U1\" lid 73 4xNDR\n";

    #[test]
    fn switch_and_ca_blocks_as_ibnetdiscover_writes_them() {
        let nodes = parse(BLOCKS).unwrap();
        assert_eq!(nodes.len(), 2);
        let s = &nodes[0];
        assert_eq!((s.kind, s.ports, s.lid, s.line), (Kind::Switch, 65, Some(73), 9));
        assert_eq!(s.desc, "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1");
        assert_eq!(s.links[0].peer, "H-e09d7303007a4bd8");
        assert_eq!(s.links[0].peer_desc.as_deref(), Some("a08-p1-dgx-04-c01 mlx5_5"));
        assert_eq!(
            (s.links[0].ca_lid, s.links[0].width, s.links[0].speed.as_deref()),
            (Some(647), Some(4), Some("NDR"))
        );
        assert_eq!(
            (s.links[1].port, s.links[1].peer_port, s.links[1].ca_lid),
            (35, 32, None)
        );
        let c = &nodes[1];
        assert_eq!((c.kind, c.desc.as_str()), (Kind::Ca, "a08-p1-dgx-04-c01 mlx5_5"));
        assert_eq!((c.links[0].peer_port, c.links[0].ca_lid), (1, Some(647)));
    }

    #[test]
    fn tabs_turned_to_spaces_and_crlf_are_still_read() {
        let mangled = BLOCKS.replace('\t', "    ").replace('\n', "\r\n");
        assert_eq!(parse(&mangled).unwrap(), parse(BLOCKS).unwrap());
    }

    #[test]
    fn what_is_not_a_capture_is_refused_with_its_line() {
        assert_eq!(parse("hello\n").unwrap_err().line, 1);
        assert!(parse("\n# only comments\n")
            .unwrap_err()
            .message
            .contains("no Switch or Ca line"));
        assert_eq!(parse("[1]\t\"H-e09d7303007a4bd8\"[1]\n").unwrap_err().line, 1);
        let cut = BLOCKS.replace("[35]\t\"S-2c5eab0300c26280\"[32]", "[35]\t\"S-2c5eab03\"[32]");
        assert_eq!(parse(&cut).unwrap_err().line, 11);
        let twice = format!("{BLOCKS}{}", &BLOCKS[BLOCKS.find("vendid").unwrap()..]);
        let e = parse(&twice).unwrap_err();
        assert!(e.message.contains("listed again (first at line 9)"), "{e}");
        let cr = BLOCKS.replace("lid 647 4xNDR\n[35]", "lid 647 4xNDR\r[35]");
        assert!(parse(&cr).unwrap_err().message.contains("carriage return"));
        assert_eq!(lid_after("lid 65535 4xNDR"), None);
    }

    #[test]
    fn grouping_lines_and_port_labels_are_read_and_near_misses_refused() {
        assert!(chassis_line("Chassis 3 (guid 0x2c90200448ec8)") && chassis_line("Chassis 12"));
        for t in [
            "Chassis",
            "Chassis x",
            "Chassis 3 (guid 0x)",
            "Chassis 3 (guid zz)",
            "Chassis 3 extra",
        ] {
            assert!(!chassis_line(t), "{t}");
        }
        let l = port_line(
            "[17][ext 5](9/1/1)\t\"H-e09d7303007a4bd8\"[1](B9D0F0/0/0/1)(e09d7303007a4bd8) \t\t# \"a08 mlx5_5\" lid 647 4xNDR",
            1,
            Kind::Switch,
        )
        .unwrap();
        assert_eq!((l.port, l.peer_port, l.ca_lid), (17, 1, Some(647)));
        assert!(port_line("[17](not a label)\t\"H-e09d7303007a4bd8\"[1]", 1, Kind::Switch).is_err());
        assert!(port_line("[17][ext x]\t\"H-e09d7303007a4bd8\"[1]", 1, Kind::Switch).is_err());
    }

    use proptest::prelude::*;

    proptest! {
        /// A switch's port line as ibnetdiscover prints it reads back as what was printed.
        #[test]
        fn every_well_formed_port_line_round_trips(
            port in 1u32..=128,
            peer_port in 1u32..=128,
            guid in any::<u64>(),
            host in "[a-z][a-z0-9-]{0,20}",
            hca in "(mlx5_[0-9]|HCA-[1-8])",
            lid in 1u32..0xfffe,
            lanes in prop::sample::select(vec![1u32, 2, 4, 8, 12]),
            speed in prop::sample::select(vec!["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"]),
            tabs in any::<bool>(),
        ) {
            let sep = if tabs { "\t" } else { "    " };
            let line = format!(
                "[{port}]{sep}\"H-{guid:016x}\"[{peer_port}]({guid:x}) {sep}{sep}# \"{host} {hca}\" lid {lid} {lanes}x{speed}"
            );
            let l = port_line(&line, 1, Kind::Switch).unwrap();
            prop_assert_eq!(l.port, port);
            prop_assert_eq!(l.peer, format!("H-{guid:016x}"));
            prop_assert_eq!(l.peer_port, peer_port);
            prop_assert_eq!(l.peer_desc, Some(format!("{host} {hca}")));
            prop_assert_eq!(l.ca_lid, Some(lid));
            prop_assert_eq!(l.width, Some(lanes));
            prop_assert_eq!(l.speed.as_deref(), Some(speed));
        }

        /// Whatever the bytes, parse answers (nodes or a line-numbered refusal), never panics.
        #[test]
        fn any_text_is_read_or_refused(text in "(\\PC|\t|\n){0,400}") {
            let _ = parse(&text);
        }
    }
}
