//! One all-reduce sweep read as an operator reads it: the α–β fit (a latency term and a
//! bandwidth term), the small-message cliff, where time stops being flat, the
//! latency/bandwidth crossover, and how the large-message figure compares with a predicted
//! ceiling. Pure: figures in, findings out.

use super::parse::SizeFigures;
use serde::Serialize;

/// Sizes at or below this are "small" for the cliff (protocol and algorithm switches happen
/// there; larger drops are bandwidth effects).
pub(crate) const CLIFF_LIMIT: u64 = 1 << 20;
/// Time is "flat" while it stays within this factor of the smallest sizes' time.
const FLAT_FACTOR: f64 = 1.5;

/// `time = α + size · β`, fitted with relative errors (every size counts, not just the
/// largest): α the latency term, 1/β the bandwidth term.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct AlphaBeta {
    pub(crate) alpha_us: f64,
    /// 1/β as algorithm bandwidth, GB/s.
    pub(crate) algbw_gbps: f64,
    /// The same as bus bandwidth (× 2(r−1)/r for all-reduce over r ranks; 0 on one rank).
    pub(crate) busbw_gbps: f64,
    /// Root-mean-square relative error of the fit over the sizes.
    pub(crate) rms_relative_error: f64,
}

/// The largest relative drop of bus bandwidth between adjacent sizes up to [`CLIFF_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Cliff {
    pub(crate) from_size: u64,
    pub(crate) to_size: u64,
    pub(crate) from_busbw: f64,
    pub(crate) to_busbw: f64,
    /// 0.4: busbw fell by 40 %.
    pub(crate) drop: f64,
}

/// What a sweep says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Findings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fit: Option<AlphaBeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cliff: Option<Cliff>,
    /// The largest size whose time is still within 1.5× the smallest sizes' time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) flat_until: Option<u64>,
    /// The smallest size reaching half the peak bus bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) crossover: Option<u64>,
    /// Bus bandwidth of the largest size.
    pub(crate) large_busbw: f64,
}

/// The α–β fit: weighted least squares minimising Σ((t − α − βn)/t)². `None` with fewer
/// than three sizes or no positive slope.
pub(crate) fn fit(rows: &[SizeFigures], ranks: u32) -> Option<AlphaBeta> {
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.time_us > 0.0)
        .map(|r| (r.size as f64, r.time_us))
        .collect();
    if pts.len() < 3 {
        return None;
    }
    // Normal equations with weights w = 1/t².
    let (mut sw, mut swx, mut swxx, mut swy, mut swxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in &pts {
        let w = 1.0 / (y * y);
        sw += w;
        swx += w * x;
        swxx += w * x * x;
        swy += w * y;
        swxy += w * x * y;
    }
    let det = sw * swxx - swx * swx;
    if det.abs() < f64::MIN_POSITIVE {
        return None;
    }
    let beta = (sw * swxy - swx * swy) / det;
    let alpha = (swy - beta * swx) / sw;
    if beta <= 0.0 || !beta.is_finite() || !alpha.is_finite() {
        return None;
    }
    let rms = (pts
        .iter()
        .map(|&(x, y)| ((alpha + beta * x - y) / y).powi(2))
        .sum::<f64>()
        / pts.len() as f64)
        .sqrt();
    // β in µs per byte: 1/β bytes per µs = 1e-3 GB/s per byte/µs.
    let algbw = 1.0 / beta / 1e3;
    // nccl-tests' bus bandwidth for all-reduce: 0 on one rank, by definition.
    let r = f64::from(ranks.max(1));
    let factor = 2.0 * (r - 1.0) / r;
    Some(AlphaBeta {
        alpha_us: alpha.max(0.0),
        algbw_gbps: algbw,
        busbw_gbps: algbw * factor,
        rms_relative_error: rms,
    })
}

/// The cliff: the largest relative busbw drop between adjacent sizes up to [`CLIFF_LIMIT`].
pub(crate) fn cliff(rows: &[SizeFigures]) -> Option<Cliff> {
    rows.windows(2)
        .filter(|w| w[1].size <= CLIFF_LIMIT && w[0].busbw > 0.0 && w[1].busbw < w[0].busbw)
        .map(|w| Cliff {
            from_size: w[0].size,
            to_size: w[1].size,
            from_busbw: w[0].busbw,
            to_busbw: w[1].busbw,
            drop: 1.0 - w[1].busbw / w[0].busbw,
        })
        .max_by(|a, b| a.drop.total_cmp(&b.drop))
}

/// The largest size whose time is within [`FLAT_FACTOR`] of the smallest sizes' (the median
/// of the first three): past it time only grows. An isolated slow size below it (the first
/// call's set-up, a noisy iteration) does not end the flat range.
pub(crate) fn flat_until(rows: &[SizeFigures]) -> Option<u64> {
    let mut first: Vec<f64> = rows.iter().take(3).map(|r| r.time_us).collect();
    if first.is_empty() {
        return None;
    }
    first.sort_by(f64::total_cmp);
    let base = first[first.len() / 2];
    rows.iter()
        .filter(|r| r.time_us <= base * FLAT_FACTOR)
        .map(|r| r.size)
        .max()
}

/// Everything a sweep says, rows in size order.
pub(crate) fn findings(rows: &[SizeFigures], ranks: u32) -> Findings {
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| r.size);
    Findings {
        fit: fit(&rows, ranks),
        cliff: cliff(&rows),
        flat_until: flat_until(&rows),
        crossover: super::stats::half_peak(&rows, |r| r.size, |r| r.busbw),
        large_busbw: rows.last().map_or(0.0, |r| r.busbw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ring all-reduce over `ranks` with latency `alpha` µs and bus bandwidth `bus` GB/s.
    fn curve(alpha: f64, bus: f64, ranks: u32, sizes: impl Iterator<Item = u64>) -> Vec<SizeFigures> {
        let r = f64::from(ranks);
        let factor = 2.0 * (r - 1.0) / r;
        sizes
            .map(|size| {
                let time_us = alpha + size as f64 / (bus / factor * 1e3);
                let algbw = size as f64 / time_us / 1e3;
                SizeFigures {
                    size,
                    time_us,
                    algbw,
                    busbw: algbw * factor,
                    p99_us: None,
                }
            })
            .collect()
    }

    fn pow2(lo: u32, hi: u32) -> impl Iterator<Item = u64> {
        (lo..=hi).map(|i| 1u64 << i)
    }

    #[test]
    fn an_exact_alpha_beta_curve_is_fitted_back() {
        let rows = curve(12.0, 380.0, 16, pow2(3, 32));
        let f = fit(&rows, 16).unwrap();
        assert!((f.alpha_us - 12.0).abs() < 1e-6, "{f:?}");
        assert!((f.busbw_gbps - 380.0).abs() < 1e-6, "{f:?}");
        assert!(f.rms_relative_error < 1e-9);
        let found = findings(&rows, 16);
        assert!(found.cliff.is_none(), "a smooth curve has no cliff: {found:?}");
        // Time doubles where size·β = α: 12 µs × 380 GB/s × (16/30) ≈ 2.4 MB.
        assert_eq!(found.crossover, Some(4 << 20));
    }

    #[test]
    fn a_known_cliff_is_named_between_its_two_sizes() {
        // The protocol switch at 64 KB: above it, latency jumps from 10 to 40 µs.
        let mut rows = curve(10.0, 300.0, 8, pow2(3, 15));
        rows.extend(curve(40.0, 300.0, 8, pow2(16, 30)));
        let c = cliff(&rows).unwrap();
        assert_eq!((c.from_size, c.to_size), (32 << 10, 64 << 10));
        assert!(c.drop > 0.4, "{c:?}");
        // Time is flat (10 µs, the transfer is a fraction of a µs) up to the cliff, not past it.
        assert_eq!(flat_until(&rows), Some(32 << 10));
        // A slow first size (on the H200: 8 B took 11.2 µs, the next ones 6.4–6.7 µs) and a
        // noisy one in the middle do not end the flat range.
        rows[0].time_us *= 1.8;
        rows[5].time_us *= 1.6;
        assert_eq!(flat_until(&rows), Some(32 << 10));
    }

    #[test]
    fn a_drop_above_one_mebibyte_is_not_the_small_message_cliff() {
        let mut rows = curve(10.0, 300.0, 8, pow2(3, 22));
        rows.extend(curve(10.0, 100.0, 8, pow2(23, 28)));
        assert!(cliff(&rows).is_none());
    }

    #[test]
    fn the_real_h200_output_is_read_for_its_latency() {
        // One H200, nccl-tests 2.19.6: one rank, so busbw is 0 and time is all latency.
        let text = include_str!("../../tests/data/nccl-tests/all_reduce_perf-b8-e256M-f4-g1.txt");
        let run = super::super::parse::parse_text(text).unwrap();
        let found = findings(&run.rows, run.ranks);
        let small = run.rows[0].time_us;
        let fit = found.fit.expect("time grows with size even on one rank");
        assert!(fit.alpha_us > 0.0 && fit.alpha_us < small * 2.0, "{fit:?} vs {small}");
        assert!(found.flat_until.is_some());
    }

    proptest! {
        /// Any α, bandwidth and rank count: the fit recovers them from the clean curve, and
        /// ±3 % noise moves them by little.
        #[test]
        fn the_fit_recovers_alpha_and_bandwidth(alpha in 2.0f64..80.0, bus in 10.0f64..900.0, ranks in 2u32..512, seed in 0u64..1000) {
            let rows = curve(alpha, bus, ranks, pow2(3, 30));
            let f = fit(&rows, ranks).unwrap();
            prop_assert!((f.alpha_us / alpha - 1.0).abs() < 1e-6);
            prop_assert!((f.busbw_gbps / bus - 1.0).abs() < 1e-6);
            let noisy: Vec<SizeFigures> = rows.iter().enumerate().map(|(i, r)| {
                let k = 1.0 + 0.03 * (((seed + i as u64) * 2654435761 % 200) as f64 / 100.0 - 1.0);
                SizeFigures { time_us: r.time_us * k, ..r.clone() }
            }).collect();
            let g = fit(&noisy, ranks).unwrap();
            prop_assert!((g.busbw_gbps / bus - 1.0).abs() < 0.1, "{g:?}");
        }
    }
}
