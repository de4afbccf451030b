//! The cluster as one petgraph graph: a tree from the fabric core through spines, leaves and
//! racks down to the hosts, with GB/s and µs on every link and each host's intra-node ring on
//! its vertex. The planner reads its node order, its crossings and its cost model from this
//! graph (routes between hosts through their lowest common switch, load per link). Pure.
//!
//! A multi-node NVLink domain (an NVL72 rack's trays) is a level below the rack: its hosts
//! hang off the domain's vertex over NVLink edges, so a route between two members never
//! touches the network, and the node order keeps each domain together.
//!
//! GPUs and NICs are not vertices: identical nodes share one GPU link matrix (one per node
//! class, see `graph::links`), so a per-host copy would only repeat it 16,384 times.

use crate::model::fabric::{Fabric, Placement};
use crate::model::natural_key;
use crate::model::topo_h::LAT_NET_US;
use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::{BTreeMap, HashMap};

/// Extra latency per switch tier crossed above the leaf (two traversals of ~0.5 µs). An
/// assumption, not an NCCL constant; only the comparison of two orders depends on it.
pub(crate) const LAT_PER_TIER_US: f64 = 1.0;

/// Where a vertex sits, top down. The order is also the order of siblings in the node order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Level {
    Core,
    Spine,
    Leaf,
    Rack,
    /// A multi-node NVLink domain.
    Domain,
    Host,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Vertex {
    pub(crate) level: Level,
    /// The switch, rack or host name (`core` for the root).
    pub(crate) name: String,
    /// Hosts only: the intra-node ring and the network the host can drive.
    pub(crate) host: Option<HostFacts>,
}

/// What the cost model needs to know about one host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostFacts {
    pub(crate) gpus: usize,
    /// The intra-node ring's slowest link, GB/s.
    pub(crate) ring_gbps: f64,
    /// Per-hop latency of that ring, µs (NVLink or PCIe).
    pub(crate) hop_latency_us: f64,
    /// GB/s the host puts on the network.
    pub(crate) net_gbps: f64,
    /// What that figure rests on when not the node's own report (`nic_gbps:`, NCCL's default).
    pub(crate) net_assumed: Option<String>,
    /// GB/s the host puts into its NVLink domain (its GPUs' NVLink together); 0 outside one.
    pub(crate) nvlink_gbps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkKind {
    /// A host's own network connection to its rack, leaf or the fabric.
    Network,
    /// A leaf's link to its spine (or to the core).
    Uplink,
    /// A spine's link to the core.
    Trunk,
    /// A rack inside its leaf, spine or the core: no cable of its own.
    Grouping,
    /// A host's NVLink into its multi-node NVLink domain.
    Nvlink,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    pub(crate) kind: LinkKind,
    /// One direction; `INFINITY` where the fabric declares no limit.
    pub(crate) gbps: f64,
    /// Added each time a route traverses the link (up or down).
    pub(crate) latency_us: f64,
}

/// One host as the graph is built from it.
pub(crate) struct HostSpec<'a> {
    pub(crate) name: &'a str,
    pub(crate) labels: &'a BTreeMap<String, String>,
    pub(crate) facts: HostFacts,
    /// The multi-node NVLink domain the host belongs to.
    pub(crate) domain: Option<&'a str>,
}

/// A route between two hosts: the links up to their lowest common ancestor, then down.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Route {
    pub(crate) up: Vec<EdgeIndex>,
    pub(crate) down: Vec<EdgeIndex>,
}

pub(crate) struct ClusterGraph {
    graph: DiGraph<Vertex, Link>,
    core: NodeIndex,
    hosts: HashMap<String, NodeIndex>,
    /// Per NVLink domain vertex, its members' networks together: NCCL joins a domain's GPUs
    /// into one system and spreads its channels over every member's NICs.
    domain_net: HashMap<NodeIndex, f64>,
}

impl ClusterGraph {
    /// Hosts in inventory order; each hangs off the deepest level its placement names.
    pub(crate) fn build(hosts: &[HostSpec], fabric: Option<&Fabric>) -> ClusterGraph {
        let mut b = Builder::new(fabric);
        for h in hosts {
            b.add_host(h);
        }
        let mut domain_net: HashMap<NodeIndex, f64> = HashMap::new();
        for &v in b.domains.values() {
            let net = b
                .graph
                .neighbors_directed(v, Direction::Outgoing)
                .filter_map(|h| b.graph[h].host.as_ref().map(|f| f.net_gbps))
                .sum();
            domain_net.insert(v, net);
        }
        ClusterGraph {
            graph: b.graph,
            core: b.core,
            hosts: b.hosts,
            domain_net,
        }
    }

    pub(crate) fn link(&self, e: EdgeIndex) -> &Link {
        &self.graph[e]
    }

    /// The host below a network link, or the switch/rack below any other link.
    pub(crate) fn below(&self, e: EdgeIndex) -> &Vertex {
        let (_, child) = self.graph.edge_endpoints(e).unwrap_or((self.core, self.core));
        &self.graph[child]
    }

    pub(crate) fn host(&self, name: &str) -> Option<&HostFacts> {
        self.hosts.get(name).and_then(|&v| self.graph[v].host.as_ref())
    }

    /// The link to a vertex's parent and the parent (none for the core).
    fn parent(&self, v: NodeIndex) -> Option<(EdgeIndex, NodeIndex)> {
        self.graph
            .edges_directed(v, Direction::Incoming)
            .next()
            .map(|e| (e.id(), e.source()))
    }

    /// Vertices from `v` up to the core, `v` first.
    fn ancestors(&self, v: NodeIndex) -> Vec<NodeIndex> {
        let mut out = vec![v];
        let mut cur = v;
        while let Some((_, p)) = self.parent(cur) {
            out.push(p);
            cur = p;
        }
        out
    }

    /// The route between two hosts through their lowest common ancestor.
    pub(crate) fn route(&self, a: &str, b: &str) -> Option<Route> {
        let (&va, &vb) = (self.hosts.get(a)?, self.hosts.get(b)?);
        let (up_a, up_b) = (self.ancestors(va), self.ancestors(vb));
        let lca = *up_a.iter().find(|v| up_b.contains(v))?;
        let edges_to = |path: &[NodeIndex]| -> Vec<EdgeIndex> {
            path.iter()
                .take_while(|&&v| v != lca)
                .filter_map(|&v| self.parent(v).map(|(e, _)| e))
                .collect()
        };
        let mut down = edges_to(&up_b);
        down.reverse();
        Some(Route {
            up: edges_to(&up_a),
            down,
        })
    }

    /// The group a host belongs to at `level`: its deepest ancestor at that level or above
    /// (a node with no leaf is grouped by its spine at the leaf level, and so on).
    pub(crate) fn group_at(&self, host: &str, level: Level) -> Option<NodeIndex> {
        let v = *self.hosts.get(host)?;
        self.ancestors(v).into_iter().find(|&a| self.graph[a].level <= level)
    }

    /// Every host, depth first from the core, siblings by level then natural name order: the
    /// ring then leaves each spine, leaf and rack exactly once.
    pub(crate) fn depth_first_hosts(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.hosts.len());
        let mut stack = vec![self.core];
        while let Some(v) = stack.pop() {
            if self.graph[v].level == Level::Host {
                out.push(self.graph[v].name.clone());
                continue;
            }
            let mut children: Vec<NodeIndex> = self.graph.neighbors_directed(v, Direction::Outgoing).collect();
            children.sort_by_cached_key(|&c| (self.graph[c].level, natural_key(&self.graph[c].name)));
            stack.extend(children.into_iter().rev());
        }
        out
    }

    /// The host's NVLink domain vertex, when it is in one.
    pub(crate) fn domain_of(&self, host: &str) -> Option<NodeIndex> {
        let v = *self.hosts.get(host)?;
        self.parent(v)
            .map(|(_, p)| p)
            .filter(|&p| self.graph[p].level == Level::Domain)
    }

    /// The network a host's traffic leaves by: its own, or, in an NVLink domain, all its
    /// domain's members' together.
    pub(crate) fn net_gbps(&self, host: &str) -> Option<f64> {
        match self.domain_of(host) {
            Some(d) => self.domain_net.get(&d).copied(),
            None => self.host(host).map(|f| f.net_gbps),
        }
    }

    /// A route between two members of one NVLink domain: NVLink only, no network.
    pub(crate) fn within_domain(&self, r: &Route) -> bool {
        !r.up.is_empty()
            && r.up
                .iter()
                .chain(&r.down)
                .all(|&e| self.graph[e].kind == LinkKind::Nvlink)
    }

    /// Hop latency of a route: one network hop plus its switch tiers.
    pub(crate) fn route_latency_us(&self, r: &Route) -> f64 {
        LAT_NET_US
            + r.up
                .iter()
                .chain(&r.down)
                .map(|&e| self.graph[e].latency_us)
                .sum::<f64>()
    }
}

/// Builds the tree, creating each switch and rack vertex once.
struct Builder<'f> {
    fabric: Option<&'f Fabric>,
    graph: DiGraph<Vertex, Link>,
    core: NodeIndex,
    hosts: HashMap<String, NodeIndex>,
    groups: HashMap<(Level, Placement), NodeIndex>,
    /// Domain vertices by their parent and name.
    domains: HashMap<(NodeIndex, String), NodeIndex>,
}

impl<'f> Builder<'f> {
    fn new(fabric: Option<&'f Fabric>) -> Self {
        let mut graph = DiGraph::new();
        let core = graph.add_node(Vertex {
            level: Level::Core,
            name: "core".into(),
            host: None,
        });
        Builder {
            fabric,
            graph,
            core,
            hosts: HashMap::new(),
            groups: HashMap::new(),
            domains: HashMap::new(),
        }
    }

    fn add_host(&mut self, h: &HostSpec) {
        let p = Placement::of(h.labels, self.fabric);
        let rack = self.group(&p, Level::Rack);
        let v = self.graph.add_node(Vertex {
            level: Level::Host,
            name: h.name.to_string(),
            host: Some(h.facts.clone()),
        });
        let (parent, link) = match h.domain {
            Some(d) => (
                self.domain(rack, d),
                Link {
                    kind: LinkKind::Nvlink,
                    gbps: h.facts.nvlink_gbps,
                    latency_us: 0.0,
                },
            ),
            None => (
                rack,
                Link {
                    kind: LinkKind::Network,
                    gbps: h.facts.net_gbps,
                    latency_us: 0.0,
                },
            ),
        };
        self.graph.add_edge(parent, v, link);
        self.hosts.insert(h.name.to_string(), v);
    }

    /// The vertex of domain `name` under `parent`, made once.
    fn domain(&mut self, parent: NodeIndex, name: &str) -> NodeIndex {
        if let Some(&v) = self.domains.get(&(parent, name.to_string())) {
            return v;
        }
        let v = self.graph.add_node(Vertex {
            level: Level::Domain,
            name: name.to_string(),
            host: None,
        });
        self.graph.add_edge(
            parent,
            v,
            Link {
                kind: LinkKind::Grouping,
                gbps: f64::INFINITY,
                latency_us: 0.0,
            },
        );
        self.domains.insert((parent, name.to_string()), v);
        v
    }

    /// The vertex of the deepest level at or above `level` that `p` names (the core if none).
    fn group(&mut self, p: &Placement, level: Level) -> NodeIndex {
        let (name, up) = match level {
            Level::Rack => (p.rack.clone(), Level::Leaf),
            Level::Leaf => (p.leaf.clone(), Level::Spine),
            Level::Spine => (p.spine.clone(), Level::Core),
            Level::Core | Level::Domain | Level::Host => return self.core,
        };
        let parent = self.group(p, up);
        let Some(name) = name else { return parent };
        let key = (level, truncated(p, level));
        if let Some(&v) = self.groups.get(&key) {
            return v;
        }
        let v = self.graph.add_node(Vertex {
            level,
            name: name.clone(),
            host: None,
        });
        let link = self.link_above(level, &name);
        self.graph.add_edge(parent, v, link);
        self.groups.insert(key, v);
        v
    }

    fn link_above(&self, level: Level, name: &str) -> Link {
        let half_tier = LAT_PER_TIER_US / 2.0;
        match level {
            Level::Leaf => Link {
                kind: LinkKind::Uplink,
                gbps: self
                    .fabric
                    .and_then(|f| f.leaves.get(name))
                    .and_then(|l| l.uplink_gbps)
                    .map_or(f64::INFINITY, |gb| gb / 8.0),
                latency_us: half_tier,
            },
            Level::Spine => Link {
                kind: LinkKind::Trunk,
                gbps: f64::INFINITY,
                latency_us: half_tier,
            },
            _ => Link {
                kind: LinkKind::Grouping,
                gbps: f64::INFINITY,
                latency_us: 0.0,
            },
        }
    }
}

/// The placement up to `level` (a vertex's identity: the same leaf name under two spines is
/// two leaves).
fn truncated(p: &Placement, level: Level) -> Placement {
    Placement {
        spine: p.spine.clone(),
        leaf: if level >= Level::Leaf { p.leaf.clone() } else { None },
        rack: if level >= Level::Rack { p.rack.clone() } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fabric::Leaf;

    fn facts(net_gbps: f64) -> HostFacts {
        HostFacts {
            gpus: 8,
            ring_gbps: 150.0,
            hop_latency_us: 0.6,
            net_gbps,
            net_assumed: None,
            nvlink_gbps: 0.0,
        }
    }

    /// Two spines; leaf-a and leaf-b under s1 (leaf-a with a 3,200 Gb/s uplink), leaf-c under
    /// s2; racks r1, r2 on leaf-a, r3 on leaf-b, r4 on leaf-c.
    fn fabric() -> Fabric {
        let leaf = |spine: &str, uplink: Option<f64>| Leaf {
            spine: Some(spine.into()),
            uplink_gbps: uplink,
        };
        Fabric {
            racks: [("r1", "leaf-a"), ("r2", "leaf-a"), ("r3", "leaf-b"), ("r4", "leaf-c")]
                .into_iter()
                .map(|(r, l)| (r.to_string(), Some(l.to_string())))
                .collect(),
            leaves: BTreeMap::from([
                ("leaf-a".to_string(), leaf("s1", Some(3200.0))),
                ("leaf-b".to_string(), leaf("s1", None)),
                ("leaf-c".to_string(), leaf("s2", None)),
            ]),
            rails: None,
            ..Default::default()
        }
    }

    fn build(hosts: &[(&str, &str)], fabric: Option<&Fabric>) -> ClusterGraph {
        let labels: Vec<BTreeMap<String, String>> = hosts
            .iter()
            .map(|(_, rack)| match *rack {
                "" => BTreeMap::new(),
                r => BTreeMap::from([("rack".to_string(), r.to_string())]),
            })
            .collect();
        let specs: Vec<HostSpec> = hosts
            .iter()
            .zip(&labels)
            .map(|((name, _), labels)| HostSpec {
                name,
                labels,
                facts: facts(50.0),
                domain: None,
            })
            .collect();
        ClusterGraph::build(&specs, fabric)
    }

    fn kinds(g: &ClusterGraph, edges: &[EdgeIndex]) -> Vec<LinkKind> {
        edges.iter().map(|&e| g.link(e).kind).collect()
    }

    #[test]
    fn hosts_in_one_rack_meet_at_the_rack() {
        let f = fabric();
        let g = build(&[("a", "r1"), ("b", "r1")], Some(&f));
        let r = g.route("a", "b").unwrap();
        assert_eq!(kinds(&g, &r.up), [LinkKind::Network]);
        assert_eq!(kinds(&g, &r.down), [LinkKind::Network]);
        assert_eq!(g.route_latency_us(&r), LAT_NET_US);
        assert_eq!(g.below(r.up[0]).name, "a");
        assert_eq!(g.link(r.up[0]).gbps, 50.0);
    }

    #[test]
    fn crossing_leaves_climbs_to_the_spine_and_pays_one_tier() {
        let f = fabric();
        let g = build(&[("a", "r1"), ("b", "r3")], Some(&f));
        let r = g.route("a", "b").unwrap();
        let path = [LinkKind::Network, LinkKind::Grouping, LinkKind::Uplink];
        assert_eq!(kinds(&g, &r.up), path);
        let mut down = path.to_vec();
        down.reverse();
        assert_eq!(kinds(&g, &r.down), down);
        assert!((g.route_latency_us(&r) - (LAT_NET_US + LAT_PER_TIER_US)).abs() < 1e-9);
        // leaf-a's uplink is 3,200 Gb/s: 400 GB/s one way; leaf-b's is undeclared.
        assert_eq!(g.link(r.up[2]).gbps, 400.0);
        assert_eq!(g.link(r.down[0]).gbps, f64::INFINITY);
        assert_eq!(g.below(r.up[2]).name, "leaf-a");
    }

    #[test]
    fn crossing_spines_goes_through_the_core() {
        let f = fabric();
        let g = build(&[("a", "r1"), ("b", "r4")], Some(&f));
        let r = g.route("a", "b").unwrap();
        assert_eq!(r.up.len(), 4);
        assert_eq!(g.link(r.up[3]).kind, LinkKind::Trunk);
        assert!((g.route_latency_us(&r) - (LAT_NET_US + 2.0 * LAT_PER_TIER_US)).abs() < 1e-9);
    }

    #[test]
    fn the_same_vertex_is_made_once_and_unknown_hosts_have_no_route() {
        let f = fabric();
        let g = build(&[("a", "r1"), ("b", "r2"), ("c", "r1")], Some(&f));
        assert_eq!(g.group_at("a", Level::Rack), g.group_at("c", Level::Rack));
        assert_ne!(g.group_at("a", Level::Rack), g.group_at("b", Level::Rack));
        assert_eq!(g.group_at("a", Level::Leaf), g.group_at("b", Level::Leaf));
        assert_eq!(g.route("a", "ghost"), None);
        assert_eq!(g.host("ghost"), None);
        assert_eq!(g.host("a"), Some(&facts(50.0)));
    }

    #[test]
    fn a_host_without_placement_hangs_off_the_core() {
        let f = fabric();
        let g = build(&[("a", "r1"), ("loose", "")], Some(&f));
        let r = g.route("a", "loose").unwrap();
        assert_eq!(r.down.len(), 1, "straight from the core");
        assert_eq!(g.group_at("loose", Level::Leaf), g.group_at("a", Level::Core));
    }

    #[test]
    fn depth_first_order_visits_each_group_once_in_natural_order() {
        let f = fabric();
        let g = build(
            &[("n10", "r1"), ("n1", "r4"), ("n2", "r1"), ("n3", "r3"), ("n9", "r2")],
            Some(&f),
        );
        assert_eq!(g.depth_first_hosts(), ["n2", "n10", "n9", "n3", "n1"]);
    }

    #[test]
    fn without_a_fabric_every_host_is_one_hop_from_the_core() {
        let g = build(&[("a", "r1"), ("b", "r2")], None);
        let r = g.route("a", "b").unwrap();
        // Racks are still groups (from labels), with no cable of their own.
        assert_eq!(kinds(&g, &r.up), [LinkKind::Network, LinkKind::Grouping]);
        assert_eq!(g.route_latency_us(&r), LAT_NET_US);
    }
}
