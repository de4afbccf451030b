//! `/proc/interrupts` parsing (format: kernel/irq/proc.c `show_interrupts`, see research/irq.md §2.1).

use std::collections::BTreeMap;

/// One numbered IRQ row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InterruptRow {
    pub(crate) irq: u32,
    /// Count per online CPU, in header order.
    pub(crate) per_cpu: Vec<u64>,
    /// Action name(s), e.g. `mlx5_comp3@pci:0000:81:00.0`; `None` when the row has none.
    pub(crate) name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interrupts {
    /// CPU ids of the columns (online CPUs only).
    pub(crate) cpus: Vec<u32>,
    pub(crate) rows: BTreeMap<u32, InterruptRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InterruptsError {
    #[error("line 1: no `CPU0 CPU1 ...` header (empty or not /proc/interrupts)")]
    NoHeader,
    #[error("line {line}: IRQ {irq} has {found} of {expected} CPU counts (file truncated?)")]
    ShortRow {
        line: usize,
        irq: u32,
        found: usize,
        expected: usize,
    },
    #[error("line {line}: `{text}` is not an IRQ row")]
    BadRow { line: usize, text: String },
}

/// Flow-handler suffixes that end the chip/hwirq columns (`4-edge`, `PCI-MSI-edge`, ...).
const FLOW_SUFFIXES: [&str; 8] = [
    "-edge",
    "-level",
    "-fasteoi",
    "-simple",
    "-percpu",
    "-percpu_devid",
    "-eoi",
    "-bad",
];

impl Interrupts {
    pub(crate) fn parse(text: &str) -> Result<Self, InterruptsError> {
        let mut lines = text.lines().enumerate().skip_while(|(_, l)| l.trim().is_empty());
        let (_, header) = lines.next().ok_or(InterruptsError::NoHeader)?;
        let cpus: Vec<u32> = header
            .split_whitespace()
            .map(|t| t.strip_prefix("CPU").and_then(|n| n.parse().ok()))
            .collect::<Option<Vec<u32>>>()
            .filter(|v| !v.is_empty())
            .ok_or(InterruptsError::NoHeader)?;
        let mut rows = BTreeMap::new();
        for (idx, line) in lines {
            let line_no = idx + 1;
            if line.trim().is_empty() {
                continue;
            }
            let Some((label, rest)) = line.split_once(':') else {
                return Err(InterruptsError::BadRow {
                    line: line_no,
                    text: line.trim().chars().take(60).collect(),
                });
            };
            let label = label.trim();
            // Architecture rows (NMI, LOC, ERR, MIS, ...) start with letters: not device IRQs.
            let Ok(irq) = label.parse::<u32>() else {
                if label.chars().all(|c| c.is_ascii_alphanumeric()) && !label.is_empty() {
                    continue;
                }
                return Err(InterruptsError::BadRow {
                    line: line_no,
                    text: line.trim().chars().take(60).collect(),
                });
            };
            let tokens: Vec<&str> = rest.split_whitespace().collect();
            let counts: Vec<u64> = tokens.iter().take(cpus.len()).map_while(|t| t.parse().ok()).collect();
            if counts.len() < cpus.len() {
                return Err(InterruptsError::ShortRow {
                    line: line_no,
                    irq,
                    found: counts.len(),
                    expected: cpus.len(),
                });
            }
            let tail = &tokens[cpus.len()..];
            let name = action_name(tail);
            rows.insert(
                irq,
                InterruptRow {
                    irq,
                    per_cpu: counts,
                    name,
                },
            );
        }
        Ok(Interrupts { cpus, rows })
    }
}

fn action_name(tail: &[&str]) -> Option<String> {
    let flow_at = tail.iter().rposition(|t| FLOW_SUFFIXES.iter().any(|s| t.ends_with(s)));
    let names = match flow_at {
        Some(i) => &tail[i + 1..],
        // No recognisable flow column: the action is the last token, if there is more than a chip.
        None if tail.len() >= 2 => &tail[tail.len() - 1..],
        None => &[][..],
    };
    let joined = names.join(" ");
    (!joined.is_empty()).then_some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MEASURED: &str = "           CPU0       CPU1       CPU2       CPU3
 26:          0          8          0          0  IO-APIC   4-edge      ttyS0
 31:          0          0       1046          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-req.0
 42:          0          0          0          0 PCI-MSIX-0000:00:06.0   0-edge      nvidia
 98:        500         12          0          3  IR-PCI-MSI 524288-edge      mlx5_comp0@pci:0000:81:00.0
 99:          1          0          0          0  PCI-MSI-edge      mlx5_cmd_eq@pci:8b76:00:02.0
NMI:          0          0          0          0   Non-maskable interrupts
ERR:          0
";

    #[test]
    fn reads_every_naming_era() {
        let ints = Interrupts::parse(MEASURED).unwrap();
        assert_eq!(ints.cpus, vec![0, 1, 2, 3]);
        assert_eq!(ints.rows[&26].name.as_deref(), Some("ttyS0"));
        assert_eq!(ints.rows[&42].name.as_deref(), Some("nvidia"));
        assert_eq!(ints.rows[&98].name.as_deref(), Some("mlx5_comp0@pci:0000:81:00.0"));
        assert_eq!(ints.rows[&98].per_cpu, vec![500, 12, 0, 3]);
        assert_eq!(ints.rows[&99].name.as_deref(), Some("mlx5_cmd_eq@pci:8b76:00:02.0"));
        assert_eq!(ints.rows.len(), 5);
    }

    #[test]
    fn truncated_file_is_a_clear_error() {
        let cut = &MEASURED[..MEASURED.find(" 42:").unwrap() + 30];
        let err = Interrupts::parse(cut).unwrap_err();
        assert_eq!(
            err,
            InterruptsError::ShortRow {
                line: 4,
                irq: 42,
                found: 2,
                expected: 4
            }
        );
        assert!(err.to_string().contains("truncated"));
        assert_eq!(Interrupts::parse("").unwrap_err(), InterruptsError::NoHeader);
        assert_eq!(Interrupts::parse("garbage\n").unwrap_err(), InterruptsError::NoHeader);
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,300}") {
            let _ = Interrupts::parse(&text);
        }

        #[test]
        fn any_cut_of_a_real_file_parses_or_errors(cut in 0usize..600) {
            let text = MEASURED;
            let cut = cut.min(text.len());
            if let Ok(ints) = Interrupts::parse(&text[..cut]) {
                prop_assert!(ints.rows.values().all(|r| r.per_cpu.len() == ints.cpus.len()));
            }
        }
    }
}
