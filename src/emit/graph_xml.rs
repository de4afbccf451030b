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
pub(crate) const CHANNELS: usize = 2;

/// The ring of `class` in every channel; `typeintra` is the class's worst-hop path type.
pub(crate) fn ring_graph(class: &NodeClass) -> String {
    let type_intra = super::xml_attr(&class.type_intra);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ring::{Method, Ring};

    fn class(order: Vec<usize>, bw: f64, type_intra: &str) -> NodeClass {
        NodeClass {
            name: "class-0".into(),
            hosts: vec!["n1".into()],
            gpus: order.len(),
            ring: Ring {
                order,
                bottleneck_gbps: bw,
                cost: 0,
                method: Method::Exact,
                gap: None,
            },
            index_order_bottleneck_gbps: 0.0,
            index_order_cost: 0,
            type_intra: type_intra.into(),
            reason: String::new(),
            graph_xml: None,
            graph_file: None,
            nvlink: None,
        }
    }

    /// The exact bytes fed to NCCL 2.28 on the GPU machine (docs/verification/h200.md).
    #[test]
    fn golden_one_gpu_ring() {
        let xml = ring_graph(&class(vec![0], 40.0, "NVL"));
        assert_eq!(xml, include_str!("../../tests/data/golden/nccl-graph-1gpu.xml"));
    }

    #[test]
    fn golden_eight_gpu_ring_in_hex() {
        let xml = ring_graph(&class(vec![0, 1, 5, 6, 2, 3, 7, 4], 48.0, "PIX"));
        assert_eq!(xml, include_str!("../../tests/data/golden/nccl-graph-8gpu.xml"));
        assert!(xml
            .lines()
            .all(|l| !l.contains('\t') && (l.trim_start().starts_with('<'))));
    }
}
