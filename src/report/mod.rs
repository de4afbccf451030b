//! Renders typed results for people (tables) and for programs (the JSON envelope): one source,
//! two forms.

pub mod collect;
pub mod doctor;
pub mod envelope;
pub mod irq;
pub mod matrix;
pub mod plan;
pub mod probe;
pub mod write;

use crate::transport::Failure;
use comfy_table::{presets, ContentArrangement, Table};

/// A table in the house style: plain aligned columns (grep- and eye-friendly, like kubectl).
pub fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().map(|h| h.to_string()));
    t
}

/// A node's failure, the same words in every table: `kind: message`.
pub fn failure_text(f: &Failure) -> String {
    format!("{}: {}", f.kind.name(), f.message)
}
