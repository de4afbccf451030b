//! A per-job `NCCL_GRAPH_FILE` in NCCL's own dialect (research/nccl.md §3; compare
//! ../shared/captures/h200-vm-1gpu/nccl-graph.xml): one ring graph (`id="0"`,
//! `pattern="4"`) whose channels hold the solved GPU order.
//!
//! Only for jobs that use exactly this node class's GPUs: NCCL applies the file to every
//! communicator, and a sub-communicator on fewer GPUs fails init (NVIDIA/nccl#1008). Never
//! put it in a global config. Lexical rules: no XML declaration, spaces not tabs, one tag
//! per line, `dev` in `0x` hex (parses the same in NCCL 2.18 and 2.21+).

use crate::model::plan::NodeClass;

/// Channels written: NCCL may double them itself when bandwidth allows.
pub const CHANNELS: usize = 2;

pub fn ring_graph(class: &NodeClass, type_intra: &str) -> String {
    let per_channel = class.ring.bottleneck_gbps / CHANNELS as f64;
    let speed = format!("{:.1}", per_channel);
    let mut out = String::from("<graphs version=\"1\">\n");
    out.push_str(&format!(
        "  <graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"{CHANNELS}\" speedintra=\"{speed}\" speedinter=\"{speed}\" latencyinter=\"0\" typeintra=\"{type_intra}\" typeinter=\"PIX\" samechannels=\"1\">\n"
    ));
    for _ in 0..CHANNELS {
        out.push_str("    <channel>\n");
        for g in &class.ring.order {
            out.push_str(&format!("      <gpu dev=\"{g:#x}\"/>\n"));
        }
        out.push_str("    </channel>\n");
    }
    out.push_str("  </graph>\n</graphs>\n");
    out
}
