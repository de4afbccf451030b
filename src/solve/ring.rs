//! Intra-node ring order: the GPU cycle that maximises the bottleneck bandwidth, then
//! minimises total hop cost — NCCL's own objective order (research/peers.md §1.2). Pure.
//!
//! Exact up to [`EXACT_MAX`] GPUs: for each distinct bandwidth value, highest first, a
//! Held–Karp dynamic programme looks for the cheapest Hamiltonian cycle using only links at
//! least that fast; the first threshold with a cycle is the optimal bottleneck. Above that, a
//! greedy tour improved by 2-opt, reported with its gap to an upper bound.

pub(crate) use crate::model::ring::{LinkMatrix, Method, Ring};

/// Largest GPU count solved exactly (2^16 × 16 states).
pub(crate) const EXACT_MAX: usize = 16;

/// Is `a` a better (bottleneck, cost) than `b`?
pub(crate) fn better(a: (f64, u32), b: (f64, u32)) -> bool {
    a.0 > b.0 + 1e-9 || ((a.0 - b.0).abs() <= 1e-9 && a.1 < b.1)
}

pub fn solve(m: &LinkMatrix) -> Ring {
    let n = m.len();
    if n <= 3 {
        let order: Vec<usize> = (0..n).collect();
        let (b, c) = m.score(&order);
        return Ring {
            order,
            bottleneck_gbps: if n < 2 { 0.0 } else { b },
            cost: c,
            method: Method::Exact,
            gap: None,
        };
    }
    if n <= EXACT_MAX {
        exact(m)
    } else {
        heuristic(m)
    }
}

fn exact(m: &LinkMatrix) -> Ring {
    let n = m.len();
    let mut thresholds: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| m.bw[i][j].min(m.bw[j][i]))
        .collect();
    thresholds.sort_by(|a, b| b.total_cmp(a));
    thresholds.dedup_by(|a, b| (*a - *b).abs() <= 1e-9);
    for t in thresholds {
        if let Some((order, cost)) = held_karp(m, t) {
            let (b, _) = m.score(&order);
            return Ring {
                order,
                bottleneck_gbps: b,
                cost,
                method: Method::Exact,
                gap: None,
            };
        }
    }
    // Unreachable for a complete matrix (the lowest threshold admits every link).
    let order: Vec<usize> = (0..n).collect();
    let (b, c) = m.score(&order);
    Ring {
        order,
        bottleneck_gbps: b,
        cost: c,
        method: Method::Exact,
        gap: None,
    }
}

/// Cheapest Hamiltonian cycle through node 0 using links with bandwidth >= `t`.
fn held_karp(m: &LinkMatrix, t: f64) -> Option<(Vec<usize>, u32)> {
    let n = m.len();
    let ok = |a: usize, b: usize| m.bw[a][b].min(m.bw[b][a]) >= t - 1e-9;
    let full = 1usize << n;
    const INF: u32 = u32::MAX;
    let mut dp = vec![INF; full * n];
    let mut parent = vec![u8::MAX; full * n];
    // Mask {0} (= 1), standing at node 0: index 1 * n + 0.
    dp[n] = 0;
    for mask in 1..full {
        if mask & 1 == 0 {
            continue;
        }
        for last in 0..n {
            let cur = dp[mask * n + last];
            if cur == INF || mask & (1 << last) == 0 {
                continue;
            }
            for next in 1..n {
                if mask & (1 << next) != 0 || !ok(last, next) {
                    continue;
                }
                let nm = mask | (1 << next);
                let c = cur + m.cost[last][next];
                // Ties: prefer the lower predecessor, so the result is deterministic.
                if c < dp[nm * n + next] {
                    dp[nm * n + next] = c;
                    parent[nm * n + next] = last as u8;
                }
            }
        }
    }
    let all = full - 1;
    let (best_last, best) = (1..n)
        .filter(|&l| dp[all * n + l] != INF && ok(l, 0))
        .map(|l| (l, dp[all * n + l] + m.cost[l][0]))
        .min_by_key(|&(l, c)| (c, l))?;
    let mut order = Vec::with_capacity(n);
    let (mut mask, mut at) = (all, best_last);
    while at != 0 {
        order.push(at);
        let p = parent[mask * n + at] as usize;
        mask &= !(1 << at);
        at = p;
    }
    order.push(0);
    order.reverse();
    Some((canonical(order), best))
}

/// Start at the lowest index and go towards the smaller neighbour (one name per cycle).
fn canonical(mut order: Vec<usize>) -> Vec<usize> {
    if let Some(pos) = order.iter().position(|&g| g == 0) {
        order.rotate_left(pos);
    }
    if order.len() > 2 && order[order.len() - 1] < order[1] {
        order[1..].reverse();
    }
    order
}

fn heuristic(m: &LinkMatrix) -> Ring {
    let n = m.len();
    // Greedy: from 0, always the best remaining link (fastest, then cheapest).
    let mut order = vec![0];
    let mut used = vec![false; n];
    used[0] = true;
    for _ in 1..n {
        let last = *order.last().unwrap_or(&0);
        let next = (0..n)
            .filter(|&j| !used[j])
            .max_by(|&a, &b| {
                (m.bw[last][a], std::cmp::Reverse(m.cost[last][a]))
                    .partial_cmp(&(m.bw[last][b], std::cmp::Reverse(m.cost[last][b])))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .unwrap_or(0);
        used[next] = true;
        order.push(next);
    }
    // 2-opt on the (bottleneck, cost) objective until no move improves it.
    let mut best = m.score(&order);
    let mut improved = true;
    let mut rounds = 0;
    while improved && rounds < 100 {
        improved = false;
        rounds += 1;
        for i in 1..n - 1 {
            for j in i + 1..n {
                order[i..=j].reverse();
                let s = m.score(&order);
                if better(s, best) {
                    best = s;
                    improved = true;
                } else {
                    order[i..=j].reverse();
                }
            }
        }
    }
    // Every GPU uses two links of the ring: the second-fastest link of the worst GPU bounds it.
    let bound = (0..n)
        .map(|i| {
            let mut v: Vec<f64> = (0..n).filter(|&j| j != i).map(|j| m.bw[i][j].min(m.bw[j][i])).collect();
            v.sort_by(|a, b| b.total_cmp(a));
            v.get(1).copied().unwrap_or(0.0)
        })
        .fold(f64::INFINITY, f64::min);
    let gap = if bound > 0.0 {
        ((bound - best.0) / bound).max(0.0)
    } else {
        0.0
    };
    Ring {
        order: canonical(order),
        bottleneck_gbps: best.0,
        cost: best.1,
        method: Method::Heuristic,
        gap: Some(gap),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every cycle through GPU 0 (the other n-1 permuted): the reference answer.
    pub(crate) fn brute_force(m: &LinkMatrix) -> (f64, u32) {
        let n = m.len();
        let mut rest: Vec<usize> = (1..n).collect();
        let mut best = (f64::NEG_INFINITY, u32::MAX);
        permute(&mut rest, 0, &mut |p| {
            let mut order = vec![0];
            order.extend_from_slice(p);
            let s = m.score(&order);
            if better(s, best) {
                best = s;
            }
        });
        best
    }

    fn permute(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
        if k == v.len() {
            f(v);
            return;
        }
        for i in k..v.len() {
            v.swap(k, i);
            permute(v, k + 1, f);
            v.swap(k, i);
        }
    }

    /// Random but realistic: a few bandwidth classes (NVLink bonds, PCIe, SYS), symmetric.
    pub(crate) fn matrix_strategy(n: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = LinkMatrix> {
        n.prop_flat_map(|n| {
            proptest::collection::vec(
                (
                    prop::sample::select(vec![
                        (370.8, 1u32),
                        (82.4, 1),
                        (48.0, 4),
                        (24.0, 5),
                        (12.0, 8),
                        (10.0, 9),
                    ]),
                    any::<bool>(),
                ),
                n * n,
            )
            .prop_map(move |cells| {
                let mut bw = vec![vec![0.0; n]; n];
                let mut cost = vec![vec![0; n]; n];
                for i in 0..n {
                    for j in i + 1..n {
                        let ((b, c), _) = cells[i * n + j];
                        bw[i][j] = b;
                        bw[j][i] = b;
                        cost[i][j] = c;
                        cost[j][i] = c;
                    }
                }
                LinkMatrix { bw, cost }
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn exact_equals_brute_force_4_to_9(m in matrix_strategy(4..=9)) {
            let r = solve(&m);
            let bf = brute_force(&m);
            prop_assert_eq!((r.bottleneck_gbps, r.cost), bf);
            prop_assert_eq!(m.score(&r.order), bf, "reported order really scores that");
            let mut seen = r.order.clone();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..m.len()).collect::<Vec<_>>(), "a permutation of all GPUs");
        }
    }

    // Brute force over (n-1)! orders: 10 GPUs (362,880) in the suite; 11 and 12 (3.6M and
    // 39.9M orders, ~50 s in a debug build) on demand:
    // `cargo test --lib exact_equals_brute_force_11_and_12 -- --ignored`.
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2))]
        #[test]
        fn exact_equals_brute_force_10(m in matrix_strategy(10..=10)) {
            let r = solve(&m);
            prop_assert_eq!((r.bottleneck_gbps, r.cost), brute_force(&m));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3))]
        #[test]
        #[ignore = "slow: 11! orders per case; run with --ignored"]
        fn exact_equals_brute_force_11_and_12(m in matrix_strategy(11..=12)) {
            let r = solve(&m);
            prop_assert_eq!((r.bottleneck_gbps, r.cost), brute_force(&m));
        }
    }

    #[test]
    fn nvlink_bridge_pairs_are_chained_through_their_bridges() {
        // NCv4-like: 0-1 and 2-3 bridged (NV4 = 82.4), the rest PCIe across sockets.
        let mut bw = vec![vec![10.0; 4]; 4];
        let mut cost = vec![vec![9; 4]; 4];
        for (a, b) in [(0, 1), (2, 3)] {
            bw[a][b] = 82.4;
            bw[b][a] = 82.4;
            cost[a][b] = 1;
            cost[b][a] = 1;
        }
        for (a, b) in [(1, 2), (0, 3)] {
            bw[a][b] = 24.0;
            bw[b][a] = 24.0;
            cost[a][b] = 5;
            cost[b][a] = 5;
        }
        let r = solve(&LinkMatrix { bw, cost });
        assert_eq!(r.order, vec![0, 1, 2, 3]);
        assert_eq!(r.bottleneck_gbps, 24.0);
    }

    #[test]
    fn large_rings_use_the_heuristic_with_a_gap() {
        let n = 24;
        let bw: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if (i as i64 - j as i64).abs() == 1 || (i, j) == (0, n - 1) || (j, i) == (0, n - 1) {
                            48.0
                        } else {
                            12.0
                        }
                    })
                    .collect()
            })
            .collect();
        let cost = vec![vec![5; n]; n];
        let r = solve(&LinkMatrix { bw, cost });
        assert_eq!(r.method, Method::Heuristic);
        assert_eq!(r.bottleneck_gbps, 48.0, "the fast ring 0-1-…-23 exists and is found");
        assert_eq!(r.gap, Some(0.0));
    }

    #[test]
    fn tiny_inputs() {
        assert_eq!(
            solve(&LinkMatrix {
                bw: vec![],
                cost: vec![]
            })
            .order,
            Vec::<usize>::new()
        );
        assert_eq!(
            solve(&LinkMatrix {
                bw: vec![vec![0.0]],
                cost: vec![vec![0]]
            })
            .order,
            vec![0]
        );
        let two = LinkMatrix {
            bw: vec![vec![0.0, 48.0], vec![48.0, 0.0]],
            cost: vec![vec![0, 4], vec![4, 0]],
        };
        assert_eq!(solve(&two).bottleneck_gbps, 48.0);
    }
}
