//! How sizes read in the traces' messages and verdicts: `1 MiB`, `512 KiB`, `4 GiB`.

/// `1 MiB`, `512 KiB`, `4 GiB`.
pub(crate) fn show_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b => format!("{b} B"),
    }
}
