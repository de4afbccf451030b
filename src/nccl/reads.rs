//! How NCCL turns a variable's text into what it acts on, so that a setting is judged by what
//! NCCL does with it, not by how it looks. Integer parameters go through `ncclLoadParam`
//! (src/misc/param.cc:78-106, NVIDIA/nccl 5067397c): `strtoll(str, NULL, 0)` — leading
//! whitespace skipped, `0x` hex, a leading `0` octal, digits up to the first other byte, no
//! digits read as 0 — and an empty value or one out of range (`errno`) leaves NCCL's default.
//! `NCCL_P2P_DISABLE` is `strtol(str, NULL, 0) == 1` into an `int`; `NCCL_P2P_LEVEL` and
//! `NCCL_NET_GDR_LEVEL` are a path name compared exactly (`strcmp`), or an old level number
//! when the value starts with a digit (`ncclGetLevel`, src/graph/paths.cc:244-280).

/// What NCCL makes of one variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reading {
    /// An integer parameter's value.
    Int(i64),
    /// An integer parameter NCCL leaves at its default (empty, or out of range).
    Default,
    /// A path level by name (`LOC`, `NVL`, `PIX`, …); `None`: no level, NCCL ignores it.
    Level(Option<&'static str>),
    /// Any other variable: its text as NCCL receives it.
    Text(String),
}

impl std::fmt::Display for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reading::Int(n) => write!(f, "{n}"),
            Reading::Default => f.write_str("NCCL's default"),
            Reading::Level(Some(l)) => f.write_str(l),
            Reading::Level(None) => f.write_str("no level (ignored)"),
            Reading::Text(t) => write!(f, "{}", t.escape_debug()),
        }
    }
}

/// Integer parameters topo-tune judges (`NCCL_PARAM(…)`: transport/shm.cc:55,
/// transport/net_ib/init.cc:27, misc/cudawrap.cc:16, init.cc:862, enqueue.cc:860,
/// init.cc:818, init.cc:399) and others NCCL reads the same way.
const INTEGER_PARAMS: [&str; 14] = [
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_CHUNK_SIZE",
    "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_DMABUF_ENABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_NET_GDR_READ",
    "NCCL_BUFFSIZE",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
];

/// NCCL's path names in order (`topoPathTypeStr`, src/graph/topo.cc:34), up to `SYS`, the
/// last one `ncclGetLevel` compares.
const PATH_NAMES: [&str; 10] = ["LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"];
/// Old level numbers 0-5 (`levelsOldToNew`, src/graph/paths.cc:243).
const OLD_LEVELS: [&str; 6] = ["LOC", "PIX", "PXB", "PHB", "SYS", "SYS"];

/// What NCCL makes of `value` for the variable `name`.
pub(crate) fn reading(name: &str, value: &str) -> Reading {
    match name {
        "NCCL_P2P_DISABLE" => Reading::Int(i64::from(strtol_int(value))),
        "NCCL_P2P_LEVEL" | "NCCL_NET_GDR_LEVEL" => Reading::Level(level(value)),
        _ if INTEGER_PARAMS.contains(&name) => load_param(value),
        _ => Reading::Text(value.to_string()),
    }
}

/// `ncclLoadParam`: empty or out of range leaves the default.
fn load_param(value: &str) -> Reading {
    if value.is_empty() {
        return Reading::Default;
    }
    match strtoll(value) {
        Ok(n) => Reading::Int(n),
        Err(Overflow) => Reading::Default,
    }
}

/// `int x = strtol(str, NULL, 0)`: out of range saturates, then the `long` is cut to an `int`.
fn strtol_int(value: &str) -> i32 {
    let wide = strtoll(value).unwrap_or_else(|Overflow| {
        if value.trim_start().starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }
    });
    wide as i32
}

fn level(value: &str) -> Option<&'static str> {
    if let Some(name) = PATH_NAMES.iter().find(|n| **n == value) {
        return Some(name);
    }
    if !value.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    // A negative `int` here indexes before the table in NCCL (undefined): no level.
    let old = usize::try_from(strtol_int(value)).ok()?;
    Some(OLD_LEVELS[old.min(OLD_LEVELS.len() - 1)])
}

/// `strtoll` out of range (`ERANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

/// C's `strtoll(s, NULL, 0)` (glibc): no digits is 0, not an error.
pub(crate) fn strtoll(s: &str) -> Result<i64, Overflow> {
    let b = s.as_bytes();
    let mut i = b
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        .count();
    let negative = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let hex_digit = b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
    let radix = match (b.get(i), b.get(i + 1)) {
        (Some(b'0'), Some(b'x' | b'X')) if hex_digit => {
            i += 2;
            16
        }
        (Some(b'0'), _) => 8,
        _ => 10,
    };
    let mut n: i128 = 0;
    for c in &b[i..] {
        let Some(d) = char::from(*c).to_digit(radix) else { break };
        n = n * i128::from(radix) + i128::from(d);
        if n > i128::from(i64::MAX) + 1 {
            return Err(Overflow);
        }
    }
    let n = if negative { -n } else { n };
    i64::try_from(n).map_err(|_| Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strtoll_reads_as_glibc_does() {
        for (text, want) in [
            ("1", Ok(1)),
            ("01", Ok(1)),
            ("010", Ok(8)),
            ("0x100000", Ok(1 << 20)),
            ("0X1f", Ok(31)),
            ("0x", Ok(0)),
            ("0xg", Ok(0)),
            ("  \t12abc", Ok(12)),
            ("1 # temporary", Ok(1)),
            ("1\u{1b}", Ok(1)),
            ("\"1\"", Ok(0)),
            ("", Ok(0)),
            ("-7", Ok(-7)),
            ("+7", Ok(7)),
            ("09", Ok(0)),
            ("9223372036854775807", Ok(i64::MAX)),
            ("-9223372036854775808", Ok(i64::MIN)),
            ("9223372036854775808", Err(Overflow)),
            ("99999999999999999999999", Err(Overflow)),
        ] {
            assert_eq!(strtoll(text), want, "{text:?}");
        }
    }

    #[test]
    fn values_are_what_nccl_acts_on() {
        assert_eq!(reading("NCCL_P2P_DISABLE", "1 # temporary"), Reading::Int(1));
        assert_eq!(reading("NCCL_P2P_DISABLE", "\"1\""), Reading::Int(0));
        // 2^32 + 1 cut to an int is 1.
        assert_eq!(reading("NCCL_P2P_DISABLE", "4294967297"), Reading::Int(1));
        assert_eq!(reading("NCCL_SHM_DISABLE", "01"), Reading::Int(1));
        assert_eq!(reading("NCCL_SHM_DISABLE", ""), Reading::Default);
        assert_eq!(reading("NCCL_CHUNK_SIZE", "0x100000"), Reading::Int(1 << 20));
        assert_eq!(reading("NCCL_CHUNK_SIZE", "99999999999999999999"), Reading::Default);
        assert_eq!(reading("NCCL_P2P_LEVEL", "LOC"), Reading::Level(Some("LOC")));
        assert_eq!(reading("NCCL_P2P_LEVEL", "loc"), Reading::Level(None));
        assert_eq!(reading("NCCL_P2P_LEVEL", "LOC "), Reading::Level(None));
        assert_eq!(reading("NCCL_P2P_LEVEL", "0"), Reading::Level(Some("LOC")));
        assert_eq!(reading("NCCL_P2P_LEVEL", "00x"), Reading::Level(Some("LOC")));
        assert_eq!(reading("NCCL_P2P_LEVEL", "2"), Reading::Level(Some("PXB")));
        assert_eq!(reading("NCCL_P2P_LEVEL", "17"), Reading::Level(Some("SYS")));
        assert_eq!(reading("NCCL_P2P_LEVEL", " 0"), Reading::Level(None));
        assert_eq!(reading("NCCL_ALGO", "\"Ring\""), Reading::Text("\"Ring\"".into()));
    }

    proptest! {
        /// Every decimal an i64 holds reads back, with any leading whitespace and trailing junk.
        #[test]
        fn decimals_round_trip(n in any::<i64>(), pad in "[ \t]{0,3}", junk in "[ #a-z]{0,4}") {
            let text = format!("{pad}{n}{junk}");
            prop_assert_eq!(strtoll(&text), Ok(n));
        }

        #[test]
        fn hex_round_trips(n in 0u32..) {
            prop_assert_eq!(strtoll(&format!("0x{n:x}")), Ok(i64::from(n)));
        }

        #[test]
        fn any_text_is_read_without_panicking(s in "\\PC{0,40}") {
            let _ = strtoll(&s);
            let _ = reading("NCCL_P2P_LEVEL", &s);
            let _ = reading("NCCL_P2P_DISABLE", &s);
        }
    }
}
