//! The rules file, `nccl-tuner.csv`, in the format of NCCL's example tuner plugin
//! (plugins/tuner/example/plugin.c in NVIDIA/nccl, since 2.27.5):
//!
//! ```text
//! collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
//! ```
//!
//! As the example reads it: `#` after optional spaces starts a comment, blank lines (spaces
//! only too) are skipped, a line may end in CR LF and in one trailing comma, fields are
//! trimmed of spaces and tabs, bounds are decimal and inclusive, `-1` means "any" (nNodes,
//! nRanks, numPipeOps, regBuff) or "NCCL's own" (channels, where the example's `0` means the
//! same), and the first matching line wins. Unlike the example, which reads an unknown
//! collective as `allreduce`, an unknown algorithm as `ring` and a number it cannot parse as
//! 0, a line it cannot read exactly is refused — that line, not the file (`parse`: the plugin
//! logs each refused line once and keeps the rest); topo-tune's own checks of a file it
//! writes refuse the whole file for one such line (`parse_strict`). Bounded: at most
//! `MAX_BYTES` and `MAX_RULES`, lines of at most `MAX_LINE` bytes (the example reads 256-byte
//! lines and would split a longer one).

/// Larger files are refused unread.
pub const MAX_BYTES: u64 = 1 << 20;
/// More rules than this are refused (a tuning has a few dozen).
pub const MAX_RULES: usize = 4096;
/// The example plugin's line buffer (`MAX_LINE_LENGTH`): a longer line is refused.
pub const MAX_LINE: usize = 255;
/// NCCL's `MAXCHANNELS`.
pub const MAX_CHANNELS: i32 = 64;

/// NCCL's `ncclFunc_t` for the collectives a tuner is asked about (src/include/nccl_common.h).
pub const COLLECTIVES: [(&str, i32); 5] = [
    ("broadcast", 0),
    ("reduce", 1),
    ("allgather", 2),
    ("reducescatter", 3),
    ("allreduce", 4),
];
/// `NCCL_ALGO_*` (src/include/plugin/nccl_tuner.h).
pub const ALGORITHMS: [(&str, i32); 7] = [
    ("tree", 0),
    ("ring", 1),
    ("collnet_direct", 2),
    ("collnet_chain", 3),
    ("nvls", 4),
    ("nvls_tree", 5),
    ("pat", 6),
];
/// `NCCL_PROTO_*`.
pub const PROTOCOLS: [(&str, i32); 3] = [("ll", 0), ("ll128", 1), ("simple", 2)];

/// One line of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub collective: i32,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algorithm: i32,
    pub protocol: i32,
    /// `-1` or `0` (the example's spelling): NCCL's own channel count.
    pub channels: i32,
    pub n_nodes: i32,
    pub n_ranks: i32,
    pub pipe_ops: i32,
    pub reg_buff: i32,
}

impl Rule {
    /// Whether the rule is for a communicator of this shape.
    pub fn fits(&self, n_nodes: usize, n_ranks: usize) -> bool {
        let any_or = |want: i32, have: usize| want == -1 || usize::try_from(want).is_ok_and(|w| w == have);
        any_or(self.n_nodes, n_nodes) && any_or(self.n_ranks, n_ranks)
    }

    /// Whether the rule is for this call.
    pub fn matches(&self, collective: i32, bytes: u64, pipe_ops: i32, reg_buff: i32) -> bool {
        self.collective == collective
            && (self.min_bytes..=self.max_bytes).contains(&bytes)
            && (self.pipe_ops == -1 || self.pipe_ops == pipe_ops)
            && (self.reg_buff == -1 || self.reg_buff == reg_buff)
    }
}

/// Why a file was refused: its line (1-based; 0 for the file as a whole) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub line: usize,
    pub why: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.why),
            n => write!(f, "line {n}: {}", self.why),
        }
    }
}

fn name_of(table: &[(&str, i32)], field: &str, what: &str) -> Result<i32, String> {
    table.iter().find(|(n, _)| *n == field).map(|(_, v)| *v).ok_or_else(|| {
        let known: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
        format!("unknown {what} {field:?} (one of {})", known.join(", "))
    })
}

/// A decimal byte count, digits only (what `strtoull(…, 10)` reads fully).
fn bytes(field: &str, what: &str) -> Result<u64, String> {
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {field:?} is not a decimal byte count"));
    }
    field.parse().map_err(|_| format!("{what} {field:?} is too large"))
}

/// `-1`, or an integer in `range`.
fn any_or(field: &str, what: &str, range: std::ops::RangeInclusive<i32>) -> Result<i32, String> {
    if field == "-1" {
        return Ok(-1);
    }
    match field.parse::<i32>() {
        Ok(v) if range.contains(&v) && field.bytes().all(|b| b.is_ascii_digit()) => Ok(v),
        _ => Err(format!(
            "{what} {field:?} is not -1 or {}..={}",
            range.start(),
            range.end()
        )),
    }
}

fn rule(line: &str) -> Result<Rule, String> {
    let f: Vec<&str> = line.split(',').map(|t| t.trim_matches([' ', '\t'])).collect();
    if !(8..=10).contains(&f.len()) {
        return Err(format!("{} fields: 8 to 10, comma-separated", f.len()));
    }
    let r = Rule {
        collective: name_of(&COLLECTIVES, f[0], "collective")?,
        min_bytes: bytes(f[1], "min_bytes")?,
        max_bytes: bytes(f[2], "max_bytes")?,
        algorithm: name_of(&ALGORITHMS, f[3], "algorithm")?,
        protocol: name_of(&PROTOCOLS, f[4], "protocol")?,
        channels: any_or(f[5], "channels", 0..=MAX_CHANNELS)?,
        n_nodes: any_or(f[6], "nNodes", 1..=i32::MAX)?,
        n_ranks: any_or(f[7], "nRanks", 1..=i32::MAX)?,
        pipe_ops: f.get(8).map_or(Ok(-1), |v| any_or(v, "numPipeOps", 1..=i32::MAX))?,
        reg_buff: f.get(9).map_or(Ok(-1), |v| any_or(v, "regBuff", 0..=1))?,
    };
    if r.min_bytes > r.max_bytes {
        return Err(format!("min_bytes {} is above max_bytes {}", r.min_bytes, r.max_bytes));
    }
    Ok(r)
}

/// A file read line by line: the rules it holds, and the lines refused (each with why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub rules: Vec<Rule>,
    pub refused: Vec<Refused>,
}

/// One line as the example plugin reads it: `None` for a blank line or a comment, else the
/// rule or why the line is refused.
fn line(raw: &str) -> Option<Result<Rule, String>> {
    if raw.len() > MAX_LINE {
        return Some(Err(format!("longer than {MAX_LINE} bytes")));
    }
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let text = raw.trim_matches([' ', '\t']);
    if text.is_empty() || text.starts_with('#') {
        return None;
    }
    if text.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Some(Err(
            "a control character (a CR inside the line, a NUL, an escape)".into()
        ));
    }
    // One trailing comma, as a spreadsheet writes it: the example's strtok never sees an
    // empty last field.
    let text = text.strip_suffix(',').unwrap_or(text);
    Some(rule(text))
}

/// The file's text read as the plugin reads it at `init`: every line it can read exactly, in
/// order, and each line it refuses. Only a file too large or not UTF-8 is refused whole.
pub fn parse(text: &[u8]) -> Result<Parsed, Refused> {
    let whole = |why: String| Refused { line: 0, why };
    if text.len() as u64 > MAX_BYTES {
        return Err(whole(format!("larger than {MAX_BYTES} bytes")));
    }
    let text = std::str::from_utf8(text).map_err(|_| whole("not UTF-8 text".into()))?;
    let mut out = Parsed::default();
    for (i, raw) in text.split('\n').enumerate() {
        match line(raw) {
            None => {}
            Some(Ok(r)) if out.rules.len() < MAX_RULES => out.rules.push(r),
            Some(Ok(_)) => out.refused.push(Refused {
                line: i + 1,
                why: format!("more than {MAX_RULES} rules"),
            }),
            Some(Err(why)) => out.refused.push(Refused { line: i + 1, why }),
        }
    }
    Ok(out)
}

/// Every rule of the file's text, or the first line refused: how topo-tune checks a file it
/// writes or stages (a file with one line the plugin would drop is never written).
pub fn parse_strict(text: &[u8]) -> Result<Vec<Rule>, Refused> {
    let parsed = parse(text)?;
    match parsed.refused.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(parsed.rules),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_plugins_sample_lines_read_as_it_reads_them() {
        // plugins/tuner/example/nccl_tuner.conf in NVIDIA/nccl (v2.27.5 and later).
        let text = b"# comment\nallreduce,0,65536,tree,simple,2,1,-1,-1,1\n\nallreduce,65537,1048576,ring,simple,4,4,32,1,0\nallreduce,1048577,4294967295,ring,ll128,-1,-1,-1,4,-1\n";
        let r = parse_strict(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].algorithm, r[0].protocol, r[0].channels, r[0].reg_buff),
            (0, 2, 2, 1)
        );
        assert_eq!(
            (r[1].min_bytes, r[1].max_bytes, r[1].n_nodes, r[1].n_ranks),
            (65537, 1048576, 4, 32)
        );
        assert_eq!((r[2].protocol, r[2].channels, r[2].pipe_ops), (1, -1, 4));
        assert!(r[0].matches(4, 65536, 1, 1) && !r[0].matches(4, 65537, 1, 1));
        assert!(r[1].fits(4, 32) && !r[1].fits(4, 16) && r[2].fits(99, 7));
        let eight = parse_strict(b" allgather , 0 , 10 , ring , ll , -1 , -1 , -1 ").unwrap();
        assert_eq!((eight[0].collective, eight[0].pipe_ops, eight[0].reg_buff), (2, -1, -1));
    }

    #[test]
    fn what_the_example_would_guess_at_is_refused_with_its_line() {
        for (text, line, needle) in [
            ("alltoall,0,1,ring,ll,-1,-1,-1", 1, "unknown collective"),
            ("allreduce,0,1,Ring,ll,-1,-1,-1", 1, "unknown algorithm"),
            ("allreduce,0,1,ring,LL,-1,-1,-1", 1, "unknown protocol"),
            ("#\nallreduce,1K,1M,ring,ll,-1,-1,-1", 2, "decimal"),
            ("allreduce,0x10,1,ring,ll,-1,-1,-1", 1, "decimal"),
            ("allreduce,-5,1,ring,ll,-1,-1,-1", 1, "decimal"),
            ("allreduce,9,1,ring,ll,-1,-1,-1", 1, "above"),
            ("allreduce,0,1,ring,ll,65,-1,-1", 1, "channels"),
            ("allreduce,0,1,ring,ll,-1,0,-1", 1, "nNodes"),
            ("allreduce,0,1,ring,ll,-1,-1,-1,-1,2", 1, "regBuff"),
            ("allreduce,0,1,ring,ll,-1,-1", 1, "7 fields"),
            ("allreduce,0,1,ring,ll,-1,-1,-1,-1,-1,9", 1, "11 fields"),
            ("allreduce,0,1,ring,ll,-1,-1,-1\r\r", 1, "control"),
            ("allreduce,0,1,ring,ll,-1,-1,-1,,", 1, "numPipeOps"),
            ("allreduce,0,99999999999999999999,ring,ll,-1,-1,-1", 1, "too large"),
        ] {
            let e = parse_strict(text.as_bytes()).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.why.contains(needle), "{text:?}: {e}");
        }
        let long = format!("allreduce,0,1,ring,ll,-1,-1,-1{}", " ".repeat(300));
        assert!(parse_strict(long.as_bytes()).unwrap_err().why.contains("longer"));
        assert!(parse(&[0xff, b'\n']).unwrap_err().why.contains("UTF-8"));
    }

    /// What the example accepts reads the same here (CR LF, a trailing comma, an indented
    /// comment, a line of spaces, channels 0); a line that cannot be read is refused alone,
    /// with its number, and the lines around it are kept.
    #[test]
    fn the_examples_formatting_reads_and_a_bad_line_is_refused_alone() {
        let text = b"  # indented comment\r\n   \r\nallreduce,0,65536,tree,simple,0,-1,-1,\r\nallreduce,1,2,warp,ll,-1,-1,-1\nallgather,0,9,ring,ll,-1,-1,-1\n";
        let p = parse(text).unwrap();
        assert_eq!(p.rules.len(), 2, "{p:?}");
        assert_eq!(
            (p.rules[0].collective, p.rules[0].channels, p.rules[0].max_bytes),
            (4, 0, 65536)
        );
        assert_eq!(p.rules[1].collective, 2);
        assert_eq!(p.refused.len(), 1);
        assert_eq!(p.refused[0].line, 4);
        assert!(p.refused[0].why.contains("unknown algorithm"), "{:?}", p.refused);
        assert_eq!(
            parse_strict(text).unwrap_err().line,
            4,
            "topo-tune's own check refuses the file"
        );
    }

    #[test]
    fn size_and_count_are_bounded() {
        let line = "allreduce,0,1,ring,ll,-1,-1,-1\n";
        let many = line.repeat(MAX_RULES + 1);
        assert!(parse_strict(many.as_bytes()).unwrap_err().why.contains("more than"));
        let huge = vec![b'#'; MAX_BYTES as usize + 1];
        assert_eq!(parse(&huge).unwrap_err().line, 0);
        assert_eq!(
            parse_strict(line.repeat(MAX_RULES).as_bytes()).unwrap().len(),
            MAX_RULES
        );
    }

    /// Every well-formed line reads back as the values written (a small exhaustive sweep over
    /// the fields' kinds of values: no dependency in the plugin for a property-test crate).
    #[test]
    fn every_well_formed_line_reads_back() {
        let mut n = 0;
        for (c, cv) in COLLECTIVES {
            for (a, av) in ALGORITHMS {
                for (p, pv) in PROTOCOLS {
                    for (lo, hi) in [(0u64, 0u64), (1, 4096), (65537, u64::MAX)] {
                        for ch in [-1, 1, 64] {
                            for (nodes, ranks) in [(-1, -1), (1, 8), (2048, 16384)] {
                                let line = format!("{c},{lo},{hi},{a},{p},{ch},{nodes},{ranks}");
                                let r = parse_strict(line.as_bytes()).unwrap()[0];
                                assert_eq!(
                                    (r.collective, r.min_bytes, r.max_bytes, r.algorithm, r.protocol),
                                    (cv, lo, hi, av, pv)
                                );
                                assert_eq!((r.channels, r.n_nodes, r.n_ranks), (ch, nodes, ranks));
                                n += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(n, 5 * 7 * 3 * 3 * 3 * 3);
    }
}
