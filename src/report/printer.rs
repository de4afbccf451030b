//! The output policy, as a value made once in `main` and handed to whatever prints: the
//! format of the result on stdout, and whether progress may be drawn on stderr (a terminal,
//! human output, no `--no-progress`). Nothing below decides that again.

/// The result's form on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Tables for people.
    Human,
    /// One JSON envelope for programs.
    Json,
}

#[derive(Debug, Clone)]
pub(crate) struct Printer {
    pub(crate) format: Format,
    /// Progress on stderr: human output, to a terminal, not turned off.
    progress: bool,
}

impl Printer {
    /// `stderr_is_terminal`: read once by the caller (`main`), never again below it.
    pub(crate) fn new(format: Format, no_progress: bool, stderr_is_terminal: bool) -> Printer {
        Printer {
            format,
            progress: format == Format::Human && !no_progress && stderr_is_terminal,
        }
    }

    /// A printer for work that reports to nothing (tests, the node side).
    pub(crate) fn quiet(format: Format) -> Printer {
        Printer::new(format, true, false)
    }

    pub(crate) fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// A progress bar over `len` nodes for a fan-out (elapsed time, ETA, the last failure),
    /// hidden when progress is not shown.
    pub(crate) fn nodes_bar(&self, len: usize) -> indicatif::ProgressBar {
        if !self.progress {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new(len as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} nodes, ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    }

    /// A progress line on stderr, shown as text (control characters escaped).
    pub(crate) fn line(&self, text: &str) {
        if self.progress {
            eprintln!("{}", super::visible(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_for_people_at_a_terminal_who_did_not_turn_it_off() {
        assert!(Printer::new(Format::Human, false, true).progress);
        assert!(!Printer::new(Format::Json, false, true).progress);
        assert!(!Printer::new(Format::Human, true, true).progress);
        assert!(!Printer::new(Format::Human, false, false).progress);
        assert!(Printer::quiet(Format::Json).json());
    }
}
