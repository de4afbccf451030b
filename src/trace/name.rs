//! Names a trace repeats on every collective — its kind, its process group — held once for
//! the process and referred to by a 4-byte handle: a rank of a collective-heavy job keeps
//! hundreds of thousands of collectives, and two strings each were most of their memory.
//! Bounded: past [`MAX_NAMES`] distinct names (a hostile trace), further ones share one name
//! that says so.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// Most distinct names held; each at most [`MAX_LEN`] bytes.
pub(crate) const MAX_NAMES: usize = 16_384;
const MAX_LEN: usize = 256;
/// What every name past the bound becomes.
const OVERFLOW: &str = "(one of too many distinct names)";

/// A name held for the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Name(u32);

#[derive(Default)]
struct Names {
    index: HashMap<&'static str, u32>,
    all: Vec<&'static str>,
}

fn names() -> &'static RwLock<Names> {
    static NAMES: OnceLock<RwLock<Names>> = OnceLock::new();
    NAMES.get_or_init(|| RwLock::new(Names::default()))
}

impl Name {
    /// The handle of `text` (cut at 256 bytes, on a character boundary).
    pub(crate) fn of(text: &str) -> Name {
        let cut = (0..=text.len().min(MAX_LEN))
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        let text = &text[..cut];
        if let Some(i) = names().read().ok().and_then(|n| n.index.get(text).copied()) {
            return Name(i);
        }
        let Ok(mut n) = names().write() else {
            return Name(u32::MAX);
        };
        if let Some(&i) = n.index.get(text) {
            return Name(i);
        }
        let text: &'static str = if n.all.len() >= MAX_NAMES {
            OVERFLOW
        } else {
            Box::leak(text.into())
        };
        if let Some(&i) = n.index.get(text) {
            return Name(i);
        }
        let i = n.all.len() as u32;
        n.all.push(text);
        n.index.insert(text, i);
        Name(i)
    }

    pub(crate) fn as_str(self) -> &'static str {
        names()
            .read()
            .ok()
            .and_then(|n| n.all.get(self.0 as usize).copied())
            .unwrap_or(OVERFLOW)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_held_once_and_read_back() {
        let a = Name::of("allreduce");
        assert_eq!(a, Name::of("allreduce"));
        assert_ne!(a, Name::of("allgather"));
        assert_eq!(a.as_str(), "allreduce");
        let long = "é".repeat(200);
        assert_eq!(Name::of(&long).as_str().len(), 256);
    }
}
