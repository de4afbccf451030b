//! A message size as operators write it (`256M`, `4G`) and as it is shown (`64 KiB`): binary
//! units, as nccl-tests reads them.

/// Bytes as nccl-tests users read them: 8 B, 64 KiB, 4 GiB (the unit only where it divides).
pub(crate) fn show(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if b >= u && b.is_multiple_of(u) {
            return format!("{} {name}", b / u);
        }
    }
    format!("{b} B")
}

/// Why text is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SizeError(pub(crate) String);

impl From<SizeError> for String {
    fn from(e: SizeError) -> String {
        e.0
    }
}

/// A message size: bytes, or with K/M/G/T (binary units, as nccl-tests reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ByteSize(pub(crate) u64);

impl std::str::FromStr for ByteSize {
    type Err = SizeError;
    fn from_str(text: &str) -> Result<Self, SizeError> {
        let t = text.trim();
        let (num, unit) = t.find(|c: char| !c.is_ascii_digit()).map_or((t, ""), |i| t.split_at(i));
        let n: u64 = num
            .parse()
            .map_err(|_| SizeError(format!("`{text}` is not a size (e.g. 4096, 256M, 1G)")))?;
        let mult: u64 = match unit
            .trim_end_matches("iB")
            .trim_end_matches('B')
            .to_ascii_uppercase()
            .as_str()
        {
            "" => 1,
            "K" => 1 << 10,
            "M" => 1 << 20,
            "G" => 1 << 30,
            "T" => 1 << 40,
            _ => return Err(SizeError(format!("`{text}`: unknown unit `{unit}` (K, M, G, T)"))),
        };
        n.checked_mul(mult)
            .filter(|&b| b > 0)
            .map(ByteSize)
            .ok_or_else(|| SizeError(format!("`{text}` is out of range")))
    }
}
