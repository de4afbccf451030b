//! Interval arithmetic on one rank's GPU timeline, HTA's way: intervals merged where they
//! overlap (`merge_kernel_intervals`), their total length, and the length two merged sets
//! share (the time communication and computation run at once). Nanoseconds, exact integers.

/// `[start, end)` in nanoseconds.
pub(crate) type Span = (i64, i64);

/// Merge overlapping or touching spans into disjoint ones, in order.
pub(crate) fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|(s, e)| e > s);
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Add a span to a merged list, spans coming in order of their start.
pub(crate) fn push_sorted(out: &mut Vec<Span>, (s, e): Span) {
    if e <= s {
        return;
    }
    match out.last_mut() {
        Some(last) if s <= last.1 => last.1 = last.1.max(e),
        _ => out.push((s, e)),
    }
}

/// The length of the union of spans fed in order of their start, without keeping them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run {
    current: Option<Span>,
    done: i64,
}

impl Run {
    pub(crate) fn add(&mut self, (s, e): Span) {
        if e <= s {
            return;
        }
        match &mut self.current {
            Some(c) if s <= c.1 => c.1 = c.1.max(e),
            _ => {
                if let Some((a, b)) = self.current {
                    self.done += b - a;
                }
                self.current = Some((s, e));
            }
        }
    }

    pub(crate) fn total(&self) -> i64 {
        self.done + self.current.map_or(0, |(a, b)| b - a)
    }
}

/// The total length of disjoint spans.
pub(crate) fn total(spans: &[Span]) -> i64 {
    spans.iter().map(|(s, e)| e - s).sum()
}

/// The length two sets of disjoint, ordered spans have in common.
pub(crate) fn shared(a: &[Span], b: &[Span]) -> i64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            sum += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_and_sharing() {
        let a = merge(vec![(5, 10), (0, 3), (2, 4), (10, 12), (20, 20)]);
        assert_eq!(a, vec![(0, 4), (5, 12)]);
        assert_eq!(total(&a), 11);
        let b = merge(vec![(3, 6), (11, 30)]);
        assert_eq!(shared(&a, &b), 1 + 1 + 1);
        assert_eq!(shared(&a, &[]), 0);
    }

    #[test]
    fn sharing_is_bounded_by_either_total() {
        // A brute-force check on a small grid: every nanosecond counted once.
        let mut seed = 7u64;
        for _ in 0..200 {
            let mut make = || {
                (0..6)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let s = (seed >> 33) as i64 % 50;
                        (s, s + (seed >> 50) as i64 % 20)
                    })
                    .collect::<Vec<_>>()
            };
            let (ra, rb) = (make(), make());
            let (a, b) = (merge(ra.clone()), merge(rb.clone()));
            let mut sorted = ra.clone();
            sorted.sort_unstable();
            let mut run = Run::default();
            let mut pushed = Vec::new();
            for x in &sorted {
                run.add(*x);
                push_sorted(&mut pushed, *x);
            }
            assert_eq!((run.total(), &pushed), (total(&a), &a));
            let inside = |spans: &[Span], t: i64| spans.iter().any(|(s, e)| *s <= t && t < *e);
            let brute_a = (0..80).filter(|t| inside(&ra, *t)).count() as i64;
            let brute_both = (0..80).filter(|t| inside(&ra, *t) && inside(&rb, *t)).count() as i64;
            assert_eq!(total(&a), brute_a);
            assert_eq!(shared(&a, &b), brute_both);
        }
    }
}
