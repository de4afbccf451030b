//! The one fan-out behind every cluster-wide command: at most `forks` nodes at once, nodes
//! started in inventory order, `--max-fail` honoured, progress reported per finished node,
//! every node's outcome returned in input order (a node whose task died reports an internal
//! failure, never another node's answer).

use crate::model::{Deploy, Failure, FailureKind, NodeOutcome};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use crate::config::MAX_FORKS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FanOutOptions {
    /// Nodes in flight at once, 1 ..= [`MAX_FORKS`].
    pub(crate) forks: usize,
    /// Stop starting new nodes once more than this many have failed.
    pub(crate) max_fail: Option<usize>,
}

/// Called once per finished node, from that node's task: host, and whether it succeeded.
pub(crate) type Progress = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// What one node's work produced.
pub(crate) struct Attempt<T> {
    pub(crate) result: Result<T, Failure>,
    pub(crate) attempts: u32,
    pub(crate) deploy: Option<Deploy>,
}

impl<T> Attempt<T> {
    pub(crate) fn once(result: Result<T, Failure>) -> Self {
        Attempt {
            result,
            attempts: 0,
            deploy: None,
        }
    }
}

/// One unit of work: the node's name, how it is reached, and the job.
pub(crate) struct Job<I> {
    pub(crate) host: String,
    pub(crate) transport: &'static str,
    pub(crate) item: I,
}

/// Run `work` on every job, at most `opts.forks` at once. Needs a tokio runtime.
pub(crate) async fn fan_out<I, T, W, Fut>(
    jobs: Vec<Job<I>>,
    opts: FanOutOptions,
    progress: Progress,
    work: W,
) -> Vec<NodeOutcome<T>>
where
    I: Send + 'static,
    T: Send + 'static,
    W: Fn(I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Attempt<T>> + Send + 'static,
{
    let semaphore = Arc::new(tokio::sync::Semaphore::new(opts.forks.clamp(1, MAX_FORKS)));
    let failures = Arc::new(AtomicUsize::new(0));
    let work = Arc::new(work);
    let names: Vec<(String, &'static str)> = jobs.iter().map(|j| (j.host.clone(), j.transport)).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, job) in jobs.into_iter().enumerate() {
        // Take the fork slot here, in job order: nodes start in the order listed, and the
        // --max-fail decision for node i sees every failure of the nodes before it that have
        // finished. The semaphore is never closed, so acquiring cannot fail.
        let permit = Arc::clone(&semaphore).acquire_owned().await.ok();
        let skip = opts.max_fail.is_some_and(|m| failures.load(Ordering::SeqCst) > m);
        let (failures, work, progress) = (Arc::clone(&failures), Arc::clone(&work), Arc::clone(&progress));
        tasks.spawn(async move {
            let _permit = permit;
            let start = Instant::now();
            let attempt = if skip {
                Attempt::once(Err(Failure::new(
                    FailureKind::Skipped,
                    "not tried: the --max-fail budget is spent",
                )))
            } else {
                let a = work(job.item).await;
                if a.result.is_err() {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
                a
            };
            progress(&job.host, attempt.result.is_ok());
            (i, attempt, start.elapsed())
        });
    }
    let mut out: Vec<Option<(Attempt<T>, Duration)>> = (0..names.len()).map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        // A panicking node task is a bug: that node reports it below, the others go on.
        if let Ok((i, attempt, took)) = joined {
            out[i] = Some((attempt, took));
        }
    }
    out.into_iter()
        .zip(names)
        .map(|(o, (host, transport))| {
            let (a, duration) = o.unwrap_or_else(|| {
                (
                    Attempt::once(Err(Failure::new(
                        FailureKind::Internal,
                        "internal failure in this node's task (a bug: please report it)",
                    ))),
                    Duration::ZERO,
                )
            });
            NodeOutcome {
                host,
                transport,
                duration,
                attempts: a.attempts,
                deploy: a.deploy,
                result: a.result,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(n: usize) -> Vec<Job<usize>> {
        (0..n)
            .map(|i| Job {
                host: format!("n{i}"),
                transport: "simulated",
                item: i,
            })
            .collect()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn bounded_ordered_and_every_node_answered() {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (f, p) = (Arc::clone(&in_flight), Arc::clone(&peak));
        let out = runtime().block_on(fan_out(
            jobs(40),
            FanOutOptions {
                forks: 4,
                max_fail: None,
            },
            Arc::new(|_, _| {}),
            move |i| {
                let (f, p) = (Arc::clone(&f), Arc::clone(&p));
                async move {
                    let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    f.fetch_sub(1, Ordering::SeqCst);
                    Attempt::once(Ok(i * 2))
                }
            },
        ));
        assert_eq!(peak.load(Ordering::SeqCst), 4, "never more than forks at once");
        let got: Vec<usize> = out.iter().map(|o| *o.result.as_ref().unwrap()).collect();
        assert_eq!(got, (0..40).map(|i| i * 2).collect::<Vec<_>>(), "input order kept");
    }

    #[test]
    fn max_fail_skips_the_rest_and_a_panic_stays_with_its_node() {
        let out = runtime().block_on(fan_out(
            jobs(6),
            FanOutOptions {
                forks: 1,
                max_fail: Some(1),
            },
            Arc::new(|_, _| {}),
            |i| async move {
                if i == 0 {
                    panic!("node task bug");
                }
                Attempt::once(if i < 3 {
                    Err(Failure::new(FailureKind::ConnectRefused, "refused"))
                } else {
                    Ok(())
                })
            },
        ));
        assert_eq!(out[0].result.as_ref().unwrap_err().kind, FailureKind::Internal);
        assert_eq!(out[1].result.as_ref().unwrap_err().kind, FailureKind::ConnectRefused);
        assert_eq!(out[2].result.as_ref().unwrap_err().kind, FailureKind::ConnectRefused);
        // Two failures counted (the panic is not): more than max_fail=1, the rest is skipped.
        for o in &out[3..] {
            assert_eq!(o.result.as_ref().unwrap_err().kind, FailureKind::Skipped);
        }
    }
}
