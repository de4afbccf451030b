//! Entry points for the fuzz harness (`tests/fuzz.rs`, feature `fuzzing`): each takes any
//! bytes, runs one parser topo-tune applies to outside input — and, where it accepts, what
//! consumes the result — and returns a short outcome (a crash is a panic, a hang is time).
//! Nothing here writes files outside a temporary directory.

use crate::model::NodeSnapshot;
use std::path::Path;

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// The kind of an outcome, not its details: the error's text with numbers and quoted values
/// blanked, cut short — so the corpus grows by new behaviour, not by new line numbers.
fn outcome<E: std::fmt::Display>(r: Result<(), E>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => {
            let e = e.to_string();
            let mut out = String::from("err:");
            let mut quoted = false;
            for c in e.chars().skip_while(|c| *c != ':').skip(1) {
                match c {
                    '"' | '`' => quoted = !quoted,
                    _ if quoted => {}
                    c if c.is_ascii_digit() => {
                        if !out.ends_with('#') {
                            out.push('#');
                        }
                    }
                    c => out.push(c),
                }
                if out.len() >= 64 {
                    break;
                }
            }
            out
        }
    }
}

/// Whatever consumes an accepted snapshot: paths, NCCL rules, the guard, the topology file.
fn consume(snap: &NodeSnapshot) {
    let classes = crate::graph::paths::path_classes(snap);
    let _ = crate::graph::paths::path_matrix(snap);
    let facts = crate::nccl::rules::Facts::new(snap, &classes, crate::nccl::rules::NodeRails::stated(Some(8)), None);
    if let Ok(d) = crate::nccl::rules::derive_from(&facts, &Default::default()) {
        let _ = crate::nccl::guard::check(&d.settings, facts.gpu_ports(), &[], true, None);
    }
    let xml = crate::emit::topo_xml::topology_xml(snap);
    // What topo-tune writes must read back as an NCCL topology.
    crate::probe::snapshot_from_xml_text(&xml, "emitted", Some("n1"))
        .map(|_| ())
        .unwrap_or_else(|e| {
            // An emitted file that is refused by our own reader is a bug only if the snapshot
            // had GPUs or RDMA NICs to place; an empty system is fine either way.
            if !snap.gpus.is_empty() {
                panic!("the emitted topology file does not read back: {e}\n{xml}");
            }
        });
}

/// cluster.yaml.
pub fn cluster_yaml(data: &[u8]) -> String {
    outcome(crate::config::Inventory::parse(Path::new("fuzz.yaml"), &text(data)).map(|_| ()))
}

static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The `topo-tune` binary hwloc imports run in (the harness's build of it).
pub fn set_binary(path: std::path::PathBuf) {
    let _ = BINARY.set(path);
}

/// An hwloc XML export, imported as the CLI imports it: topo-tune's prechecks, then hwloc in
/// a child process ([`set_binary`]), so a crash inside hwloc is an outcome (`died (signal N)`)
/// rather than the end of the run. Without a binary, in-process.
pub fn hwloc_xml(data: &[u8]) -> String {
    let Some(bin) = BINARY.get() else {
        let r = crate::probe::snapshot_from_xml_text(&text(data), "fuzz.xml", Some("n1")).map(|s| consume(&s));
        return outcome(r);
    };
    let Ok(dir) = tempfile::tempdir() else {
        return "skip:tempdir".into();
    };
    let file = dir.path().join("fuzz.xml");
    if std::fs::write(&file, data).is_err() {
        return "skip:write".into();
    }
    outcome(crate::probe::import_in_child(bin, &file, None).map(|s| consume(&s)))
}

/// An NCCL topology file.
pub fn nccl_topology(data: &[u8]) -> String {
    let t = text(data);
    if crate::probe::xml::kind_of(&t) == crate::probe::xml::XmlKind::Hwloc {
        return "skip:hwloc".into();
    }
    outcome(crate::probe::snapshot_from_xml_text(&t, "fuzz.xml", Some("n1")).map(|s| consume(&s)))
}

/// `/proc/interrupts`.
pub fn proc_interrupts(data: &[u8]) -> String {
    outcome(crate::probe::procfs::Interrupts::parse(&text(data)).map(|_| ()))
}

/// A foreign `/etc/nccl.conf`: what is kept of it, then the assembly with topo-tune's drop-in.
pub fn foreign_nccl_conf(data: &[u8]) -> String {
    use crate::apply::writer::{foreign_conf, Manifest};
    let version = Some(crate::model::NcclVersion(2, 28, 9));
    let conf = text(data);
    let r = foreign_conf("/etc/nccl.conf", Some(&conf), &Manifest::default(), None, version).and_then(|kept| {
        let mut dropins = vec![("50-topo-tune.conf".to_string(), "NCCL_IB_HCA==mlx5_0\n".to_string())];
        if let Some(k) = kept {
            dropins.push(("00-preserved-nccl.conf".to_string(), k));
        }
        crate::nccl::conf::assemble(&dropins, version, "managed by topo-tune")
            .map(|_| ())
            .map_err(|r| crate::apply::writer::WriteError::Invalid {
                path: "conf.d".into(),
                message: r.to_string(),
            })
    });
    outcome(r)
}

/// A config file NCCL or a container reads, line by line as each reader takes it (NCCL's
/// `setEnvFile`, `docker --env-file`, shell rules), and every setting judged as doctor does.
pub fn nccl_config_lines(data: &[u8]) -> String {
    let conf = text(data);
    let lines = conf.split_inclusive('\n').count();
    for l in crate::nccl::conf::read_lines(&conf) {
        assert!(!l.name.contains('=') && !l.value.contains(['\n', '\0']), "{l:?}");
        assert!((1..=lines).contains(&l.line), "{l:?} of {lines} lines");
    }
    let mut seen = 0;
    for file in ["/etc/nccl.conf", "/etc/nccl/topo-tune/nccl.env", "/etc/environment"] {
        let (found, misread) = crate::doctor::conf::settings_of(file, &conf);
        for f in &found {
            let _ = f.reading().to_string();
        }
        seen += found.len() + misread.len();
    }
    format!("{} settings or misreadings", seen.min(4))
}

/// A node's doctor answer: parsed, checked, and where accepted, shown as doctor's table row
/// and node_exporter's textfile are made of it.
pub fn doctor_answer(data: &[u8]) -> String {
    let r = serde_json::from_str::<crate::node::calls::DoctorReport>(&text(data))
        .map_err(|e| e.to_string())
        .and_then(|report| {
            crate::doctor::answer::check_report(&report.hostname, &report.checks, &crate::doctor::check_ids())
                .map_err(|e| e.to_string())?;
            if let Some(v) = &report.versions {
                v.check().map_err(|e| e.to_string())?;
                let judged = crate::doctor::consistency::compare(&[(report.hostname.as_str(), v), ("other", v)]);
                assert_eq!(judged.len(), 2);
            }
            let detail = crate::report::doctor::DoctorDetail::from(&report);
            let row = crate::report::envelope::NodeRow::ok(&report.hostname, false, Some(detail));
            let gauges = crate::report::metrics::textfile(&[row], 0);
            assert!(gauges.lines().all(|l| !l.contains('\r')), "{gauges}");
            Ok(())
        });
    outcome(r)
}

/// `irq-pin --restore`'s record (`/etc/topo-tune/irq-pin.before.json`, a file anyone with root
/// could have edited): read and checked as the restore reads it, in a temporary tree.
pub fn irq_restore_record(data: &[u8]) -> String {
    let Ok(dir) = tempfile::tempdir() else {
        return "no temporary directory".into();
    };
    let etc = dir.path().join("etc/topo-tune");
    if std::fs::create_dir_all(&etc)
        .and_then(|()| std::fs::write(etc.join("irq-pin.before.json"), data))
        .is_err()
    {
        return "cannot write".into();
    }
    let r = crate::apply::tree::Tree::open(dir.path())
        .map_err(|e| e.to_string())
        .and_then(|tree| crate::irq::restore::load(&tree).map(|_| ()).map_err(|e| e.to_string()));
    outcome(r)
}

/// An `ibnetdiscover` capture: parsed, and where it reads, derived and written as cluster.yaml
/// text, which must parse as a cluster.yaml fragment.
pub fn ibnetdiscover(data: &[u8]) -> String {
    let r = crate::wires::ibnet::parse(&text(data)).map(|nodes| {
        let d = crate::wires::derive::derive(&nodes, &Default::default());
        let yaml = crate::wires::section::cluster_yaml(&d, "fuzz");
        assert!(yaml.starts_with('#') && yaml.contains("\nfabric:\n"), "{yaml}");
    });
    outcome(r)
}

/// An `aws ec2 describe-instance-topology` answer, read and derived as `fabric` does.
pub fn aws_topology(data: &[u8]) -> String {
    let r = crate::wires::aws::parse(&text(data)).map(|(nodes, _)| {
        let d = crate::wires::derive::derive(&nodes, &Default::default());
        assert!(d.hosts.iter().all(|h| h.ports.len() == 1), "an instance is one port");
    });
    outcome(r)
}

/// A GUID map (`fabric --guid-map`): every name it accepts is a plain host name.
pub fn guid_map(data: &[u8]) -> String {
    let r = crate::wires::guid_map(&text(data)).map(|names| {
        assert!(names
            .iter()
            .all(|(g, n)| g.len() == 16 && !n.is_empty() && !n.contains(char::is_whitespace)));
    });
    outcome(r)
}

/// A snapshot JSON (a node's answer, a `--from-probes` file).
pub fn snapshot_json(data: &[u8]) -> String {
    outcome(NodeSnapshot::from_json(&text(data)).map(|s| consume(&s)))
}

/// What consumes a parsed benchmark run: the decision rule over rounds made of it.
fn judge_run(run: &crate::bench::parse::BenchRun) {
    use crate::bench::stats::{judge, Gate, Round};
    let round = Round {
        baseline: run.clone(),
        candidate: run.clone(),
    };
    let _ = judge(&vec![round; 6], &Gate::default());
}

/// nccl-tests' text output (stdout and stderr of a benchmark run).
pub fn nccl_tests_text(data: &[u8]) -> String {
    outcome(crate::bench::parse::parse_text(&text(data)).map(|r| judge_run(&r)))
}

/// nccl-tests' `-J` JSON, through the runner's judgement (as `apply` reads a run).
pub fn nccl_tests_json(data: &[u8]) -> String {
    let answer = crate::runner::BenchAnswer {
        exit_code: Some(0),
        json: Some(text(data)),
        ..Default::default()
    };
    outcome(crate::runner::judge(&answer, 1).map(|r| judge_run(&r)))
}

/// The cluster the artifact targets are checked against (the bundled canary demo).
fn demo_inventory() -> Option<crate::config::Inventory> {
    crate::config::Inventory::parse(
        Path::new("examples/canary-demo.yaml"),
        include_str!("../examples/canary-demo.yaml"),
    )
    .ok()
}

/// A rollout record read back by `apply --resume` (and `status`): parsed, then held to what
/// topo-tune would write for the cluster (`canary::vet`); an accepted record is consumed as
/// the engine would (GPUs per wave, the candidates' fingerprints).
pub fn rollout_record(data: &[u8]) -> String {
    let Some(inv) = demo_inventory() else {
        return "skip:inventory".into();
    };
    let r: crate::canary::state::Rollout = match serde_json::from_slice(data) {
        Ok(r) => r,
        Err(e) => return outcome::<String>(Err(format!("json: {e}"))),
    };
    outcome(crate::canary::vet::check(&r, &inv).map(|()| {
        for w in &r.waves {
            let _ = r.gpus_per_node(&w.hosts);
        }
        for b in &r.bundles {
            let _ = b.fingerprint();
        }
    }))
}

/// A `plan.json` handed to `init --plan` / `apply --plan`: read as they read it, then every
/// class admitted (or refused) for each of its nodes and rendered into its drop-in.
pub fn plan_json(data: &[u8]) -> String {
    let Some(inv) = demo_inventory() else {
        return "skip:inventory".into();
    };
    let r = crate::flow::plan::plan_from_text(&text(data), &inv).and_then(|plan| {
        // The plan's own facts, as a fresh plan's (the fuzzer has no nodes to ask).
        let facts = crate::flow::plan::Facts::of_plan(&plan, &[]);
        for class in &plan.nccl.classes {
            for host in &class.hosts {
                let Some(node) = inv.nodes.iter().find(|n| &n.host == host) else {
                    continue;
                };
                crate::flow::plan::admit(&inv, node, class, &facts)?;
                crate::apply::writer::Bundle::of(class).map_err(|e| crate::model::Refusal(e.to_string()))?;
            }
        }
        Ok(())
    });
    outcome(r)
}

/// A tuning.json handed to `init --tuning` / `apply --tuning`: read and reviewed as they read
/// it, then given to a class (`tune::onto`) and rendered into a drop-in and a rules file the
/// writer accepts.
pub fn tuning_json(data: &[u8]) -> String {
    let r = crate::flow::tuned::from_text(&text(data)).and_then(|(tuning, csv)| {
        let class = crate::model::plan::NcclClass {
            name: "nccl-0".into(),
            hosts: vec!["p5en-01".into()],
            nccl_version: tuning.nccl_version,
            settings: Vec::new(),
            left_out: Vec::new(),
            topology_xml: None,
            gpu_ports: Vec::new(),
        };
        let tuned = crate::tune::onto::tuned_class(&class, &tuning, Some(&"a".repeat(64)))?;
        crate::apply::writer::Bundle::of(&tuned).map_err(|e| crate::model::Refusal(e.to_string()))?;
        nccl_tuner_topo_tune::rules::parse_strict(csv.as_bytes()).map_err(|e| crate::model::Refusal(e.to_string()))?;
        Ok(())
    });
    outcome(r)
}

/// A PyTorch profiler trace through the streaming event reader, then everything that
/// consumes a read trace: one rank's figures and the job's analysis (`diagnose --trace`).
pub fn trace_events(data: &[u8]) -> String {
    outcome(crate::trace::read::read(data).map(|raw| {
        let rank = crate::trace::RankTrace::new(0, "fuzz".into(), Some("h".into()), None, raw);
        let twin = crate::trace::RankTrace::new(
            1,
            "twin".into(),
            None,
            Some("n".into()),
            crate::trace::read::RawTrace::default(),
        );
        let report = crate::trace::analyse(&[rank, twin], None);
        assert!(
            report.job.comm_share.is_finite() && report.job.exposed_share >= -1e-9,
            "{report:?}"
        );
    }))
}
