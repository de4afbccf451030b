//! Renders typed results for people (tables) and for programs (JSON): one source, two forms.

pub mod matrix;
pub mod probe;

use comfy_table::{presets, ContentArrangement, Table};

/// A table in the house style: plain aligned columns (grep- and eye-friendly, like kubectl).
pub fn table(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().map(|h| h.to_string()));
    t
}
