//! Slurm: `plan --output-dir` writes topology.conf (and topology.yaml) and a SLURM_HOSTFILE in
//! Slurm's node names; Debian's own slurmctld (22.05, started on loopback with munge) reads the
//! tree topology.conf and `scontrol show topology` shows the tree; Debian 13's slurmctld 24.11,
//! in the root scripts/setup.sh makes, reads the blocks written for NVLink domains.

use crate::common::tt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn plan(cfg: &Path, out: &Path) -> std::process::Output {
    tt(["plan"]).json().config(cfg).out(out).run().0
}

/// A cluster of paper nodes whose Slurm names are not their host names.
fn renamed_cluster(dir: &Path) -> std::path::PathBuf {
    let cfg = dir.join("cluster.yaml");
    std::fs::write(
        &cfg,
        "nccl_version: \"2.28.9\"\n\
         fabric:\n  leaves:\n    leaf-a: {spine: spine-1}\n    leaf-b: {spine: spine-1}\n  racks:\n    r1: {leaf: leaf-a}\n    r2: {leaf: leaf-b}\n\
         nodes:\n\
         \x20 - host: \"gpu-a[1-2].example.net\"\n    slurm_name: \"ga[01-02]\"\n    labels: {rack: r1}\n    simulate: aws-p5en\n\
         \x20 - host: \"gpu-b[1-2].example.net\"\n    slurm_name: \"gb[01-02]\"\n    labels: {rack: r2}\n    simulate: aws-p5en\n",
    )
    .unwrap();
    cfg
}

#[test]
fn plan_writes_slurm_topology_and_a_hostfile_in_slurm_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = plan(&renamed_cluster(dir.path()), &out);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let conf = std::fs::read_to_string(out.join("topology.conf")).unwrap();
    let lines: Vec<&str> = conf.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "SwitchName=r1 Nodes=ga[01-02]",
            "SwitchName=r2 Nodes=gb[01-02]",
            "SwitchName=leaf-a Switches=r1",
            "SwitchName=leaf-b Switches=r2",
            "SwitchName=spine-1 Switches=leaf-a,leaf-b",
        ]
    );
    let yaml = std::fs::read_to_string(out.join("topology.yaml")).unwrap();
    assert!(
        yaml.contains("- topology: topo-tune\n  cluster_default: true\n  tree:\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("    - switch: r1\n      nodes: \"ga[01-02]\"\n"),
        "{yaml}"
    );
    assert!(
        yaml.contains("    - switch: spine-1\n      children: \"leaf-a,leaf-b\"\n"),
        "{yaml}"
    );
    let hostfile = std::fs::read_to_string(out.join("slurm-hostfile")).unwrap();
    let hosts: std::collections::BTreeSet<&str> = hostfile.lines().collect();
    assert_eq!(hosts, ["ga01", "ga02", "gb01", "gb02"].into_iter().collect());
    assert_eq!(hostfile.lines().count(), 32, "one line per GPU (8 per node)");
    // The mpirun hostfile keeps the ssh names.
    assert!(std::fs::read_to_string(out.join("hostfile"))
        .unwrap()
        .contains("gpu-a1.example.net slots=8"));
}

#[test]
fn slurm_names_are_checked_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    let run = |text: &str| {
        std::fs::write(&cfg, text).unwrap();
        let o = plan(&cfg, &dir.path().join("out"));
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, out) = run("nodes:\n  - host: \"n[1-3]\"\n    slurm_name: \"s[1-2]\"\n    simulate: aws-p4d\n");
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()), "{out}");
    assert!(out.contains("c.yaml:3:") && out.contains("names 2 node(s)"), "{out}");
    let (code, out) = run(
        "nodes:\n  - host: a\n    slurm_name: s1\n    simulate: aws-p4d\n  - host: b\n    slurm_name: s1\n    simulate: aws-p4d\n",
    );
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()), "{out}");
    assert!(out.contains("Slurm name `s1`"), "{out}");
    let (code, out) = run("nodes:\n  - host: a\n    slurm_name: \"s 1\"\n    simulate: aws-p4d\n");
    assert_eq!(code, Some(topo_tune::exit::DATA_ERROR.code()), "{out}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// munged and slurmctld for one test, stopped on drop: Debian 12's own (Slurm 22.05), or those
/// of a Debian 13 root (`root`, Slurm 24.11, made by scripts/setup.sh) run through chroot.
struct Slurm {
    dir: tempfile::TempDir,
    children: Vec<Child>,
    root: Option<PathBuf>,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Debian 13 root with Slurm 24.11 (topology/block), as scripts/setup.sh makes it.
fn block_root() -> PathBuf {
    let root = PathBuf::from(
        std::env::var("TOPO_TUNE_SLURM_BLOCK_ROOT").unwrap_or_else(|_| "/var/lib/topo-tune-tests/trixie".into()),
    );
    assert!(
        root.join("usr/sbin/slurmctld").exists(),
        "{} has no slurmctld: scripts/setup.sh makes the Debian 13 root with Slurm 24.11",
        root.display()
    );
    root
}

impl Slurm {
    fn conf(&self) -> std::path::PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A path as the daemons see it (inside the root, when there is one).
    fn seen(&self, p: &Path) -> PathBuf {
        match &self.root {
            Some(r) => Path::new("/").join(p.strip_prefix(r).unwrap()),
            None => p.to_path_buf(),
        }
    }

    /// `tool` run as the daemons are: directly, or chrooted into the root.
    fn command(&self, tool: &str) -> Command {
        match &self.root {
            Some(r) => {
                let mut c = Command::new("/usr/sbin/chroot");
                c.arg(r).arg(tool);
                c
            }
            None => Command::new(tool),
        }
    }

    /// Start munge and slurmctld on loopback with `topology` beside a slurm.conf naming `nodes`.
    fn start(topology: &str, nodes: &str) -> Slurm {
        for tool in ["/usr/sbin/slurmctld", "/usr/sbin/munged", "/usr/bin/scontrol"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: scripts/setup.sh installs slurmctld, slurm-client and munge"
            );
        }
        Slurm::start_in(None, "topology/tree", topology, nodes)
    }

    /// The same with a plugin and, optionally, a root holding the daemons.
    fn start_in(root: Option<PathBuf>, plugin: &str, topology: &str, nodes: &str) -> Slurm {
        let base = root.as_ref().map_or_else(std::env::temp_dir, |r| r.join("tmp"));
        let dir = tempfile::Builder::new().prefix("tt-slurm-").tempdir_in(base).unwrap();
        let mut slurm = Slurm {
            dir,
            children: Vec::new(),
            root,
        };
        let d = slurm.dir.path().to_path_buf();
        for sub in ["state", "run", "log"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let key = d.join("munge.key");
        std::fs::write(&key, [7u8; 128]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let socket = d.join("run/munge.sock");
        let at = |p: &Path| slurm.seen(p).display().to_string();
        let munged = slurm
            .command("/usr/sbin/munged")
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", at(&key)))
            .arg(format!("--socket={}", at(&socket)))
            .arg(format!("--pid-file={}", at(&d.join("run/munged.pid"))))
            .arg(format!("--log-file={}", at(&d.join("log/munged.log"))))
            .arg(format!("--seed-file={}", at(&d.join("run/munge.seed"))))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        slurm.children.push(munged);
        let inner = slurm.seen(&d);
        std::fs::write(
            slurm.conf(),
            format!(
                "ClusterName=tt\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={}\nSlurmdPort={}\nSlurmUser=root\n\
                 AuthType=auth/munge\nAuthInfo=socket={}\nStateSaveLocation={}/state\nSlurmctldPidFile={}/run/slurmctld.pid\n\
                 SlurmctldLogFile={}/log/slurmctld.log\nTopologyPlugin={plugin}\nSelectType=select/cons_tres\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
                 NodeName={nodes} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\nPartitionName=all Nodes=ALL Default=YES State=UP\n",
                free_port(),
                free_port(),
                slurm.seen(&socket).display(),
                inner.display(),
                inner.display(),
                inner.display()
            ),
        )
        .unwrap();
        std::fs::write(d.join("topology.conf"), topology).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let conf = slurm.seen(&slurm.conf());
        let ctld = slurm
            .command("/usr/sbin/slurmctld")
            .args(["-D", "-i", "-f"])
            .arg(&conf)
            .env("SLURM_CONF", &conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        slurm.children.push(ctld);
        slurm
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log/slurmctld.log")).unwrap_or_default()
    }

    /// `scontrol show topology`, once slurmctld answers (or why it did not).
    fn show_topology(&mut self) -> Result<String, String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let conf = self.seen(&self.conf());
        loop {
            let o = self
                .command("/usr/bin/scontrol")
                .args(["show", "topology"])
                .env("SLURM_CONF", &conf)
                .output()
                .unwrap();
            // Slurm 24.11's scontrol exits 0 with nothing on stdout when no controller answers.
            if o.status.success() && !o.stdout.is_empty() {
                return Ok(String::from_utf8_lossy(&o.stdout).into_owned());
            }
            let exited = self.children.last_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(format!(
                    "slurmctld did not answer ({exited:?}): {}\n{}",
                    String::from_utf8_lossy(&o.stderr),
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn slurm_24_11_reads_the_blocks_topo_tune_writes_for_nvlink_domains() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = format!("{}/examples/nvl72/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    assert_eq!(plan(Path::new(&cfg), &out).status.code(), Some(0));
    let topology = std::fs::read_to_string(out.join("topology.conf")).unwrap();
    let root = block_root();
    let mut slurm = Slurm::start_in(Some(root.clone()), "topology/block", &topology, "gb-[01-36]");
    let shown = slurm.show_topology().unwrap();
    assert!(
        shown.contains("BlockName=block001 BlockIndex=0 Nodes=gb-[01,03,05,07,09,11,13,15,17,19,21,23,25,27,29,31,33,35] BlockSize=18"),
        "{shown}\n{}",
        slurm.log()
    );
    assert!(shown.contains("BlockName=block002 BlockIndex=1"), "{shown}");
    assert!(
        shown.contains("AggregatedBlock=block[001-002]") && shown.contains("Nodes=gb-[01-36] BlockSize=36"),
        "BlockSizes=18,36: the two domains pair into one block of 36\n{shown}"
    );
    let log = slurm.log();
    assert!(
        !log.contains("fatal") && !log.contains("Invalid") && !log.contains("lack access"),
        "{log}"
    );
    // A tray in no domain: in no block, which Slurm warns of (the file says so too).
    let mut with_login = Slurm::start_in(Some(root.clone()), "topology/block", &topology, "gb-[01-36],login1");
    with_login.show_topology().unwrap();
    assert!(
        with_login.log().contains("blocks lack access to 1 nodes: login1"),
        "{}",
        with_login.log()
    );
    // Slurm checks BlockSizes itself: sizes that are not power-of-two multiples are fatal (so
    // the clean log above is Slurm's word, not ours).
    drop(slurm);
    drop(with_login);
    let wrong = topology.replace("BlockSizes=18,36", "BlockSizes=18,30");
    let mut bad = Slurm::start_in(Some(root), "topology/block", &wrong, "gb-[01-36]");
    let answer = bad.show_topology();
    assert!(answer.is_err(), "{answer:?}");
    assert!(bad.log().contains("Invalid BlockSizes"), "{}", bad.log());
}

#[test]
fn slurmctld_reads_the_topology_topo_tune_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = plan(&renamed_cluster(dir.path()), &out);
    assert_eq!(o.status.code(), Some(0));
    let topology = std::fs::read_to_string(out.join("topology.conf")).unwrap();
    let mut slurm = Slurm::start(&topology, "ga[01-02],gb[01-02]");
    let shown = slurm.show_topology().unwrap();
    assert!(!slurm.log().contains("switch configuration"), "{}", slurm.log());
    assert!(
        shown.contains("SwitchName=r1 Level=0") && shown.contains("Nodes=ga[01-02]"),
        "{shown}"
    );
    assert!(
        shown.contains("SwitchName=spine-1 Level=2") && shown.contains("Nodes=ga[01-02],gb[01-02]"),
        "the spine reaches every node:\n{shown}"
    );

    // The same file on the bundled example cluster (no slurm_name: host names).
    let cfg = format!("{}/examples/cluster.yaml", env!("CARGO_MANIFEST_DIR"));
    let example = dir.path().join("example");
    assert_eq!(plan(Path::new(&cfg), &example).status.code(), Some(0));
    let topology = std::fs::read_to_string(example.join("topology.conf")).unwrap();
    let mut slurm = Slurm::start(&topology, "p5en-[01-08],ndv5-[01-02]");
    let shown = slurm.show_topology().unwrap();
    assert!(shown.contains("SwitchName=spine-1 Level=2"), "{shown}");
    assert!(shown.contains("ndv5-[01-02],p5en-[01-08]"), "{shown}");

    assert!(!slurm.log().contains("switch configuration"), "{}", slurm.log());

    // slurmctld checks the names: a node the topology names but slurm.conf does not is
    // logged (so a clean log above is Slurm's word, not ours).
    let mut wrong = Slurm::start("SwitchName=s1 Nodes=ga[01-03]\n", "ga[01-02]");
    wrong.show_topology().unwrap();
    assert!(
        wrong.log().contains("Invalid hostnames in switch configuration: ga03"),
        "{}",
        wrong.log()
    );
}

/// examples/slurm/healthcheck.sh, run as Slurm would run it on a node whose mlx5 interrupts
/// all sit on CPU 0: real `topo-tune doctor` (on a fake tree), real `scontrol` against a real
/// slurmctld — the node ends up drained with a one-line reason naming the failing checks.
#[test]
fn the_health_check_drains_a_node_whose_checks_fail() {
    use crate::common::machines::{self, Mlx5Naming};
    let trees = tempfile::tempdir().unwrap();
    let bad = trees.path().join("bad");
    machines::irq_box(&bad, Mlx5Naming::Modern);
    let mut slurm = Slurm::start("SwitchName=s1 Nodes=ga[01-02]\n", "ga[01-02]");
    slurm.show_topology().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/slurm/healthcheck.sh");
    let run = |node: &str, fsroot: &Path| {
        Command::new(&script)
            .env("SLURMD_NODENAME", node)
            .env("TOPO_TUNE", crate::common::run::binary_path())
            .env("TOPO_TUNE_FSROOT", fsroot)
            .env("SLURM_CONF", slurm.conf())
            .output()
            .unwrap()
    };
    let o = run("ga01", &bad);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let show = |node: &str| {
        let o = Command::new("/usr/bin/scontrol")
            .args(["show", "node", node])
            .env("SLURM_CONF", slurm.conf())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let ga01 = show("ga01");
    assert!(ga01.contains("DRAIN"), "{ga01}");
    let reason = ga01
        .lines()
        .find_map(|l| l.trim().strip_prefix("Reason="))
        .unwrap_or_else(|| panic!("no reason: {ga01}"));
    assert!(
        reason.starts_with("topo-tune doctor: ") && reason.contains("mlx5-irq-placement"),
        "{reason}"
    );
    // A tree doctor cannot read is not the node's fault: logged, not drained.
    let o = run("ga02", &trees.path().join("missing"));
    assert_eq!(o.status.code(), Some(0));
    assert!(!show("ga02").contains("DRAIN"), "{}", show("ga02"));
}

/// A topology discovered from a real capture (`fabric --from-ibnetdiscover`), pasted into a
/// cluster.yaml and planned: slurmctld reads the topology.conf `plan` writes from it.
#[test]
fn slurmctld_reads_the_topology_of_a_discovered_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let capture = format!(
        "{}/tests/data/fabric/fdr10-sx6036.ibnetdiscover",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = crate::common::tt(["fabric", "--from-ibnetdiscover", &capture, "--output-dir"])
        .arg(dir.path())
        .run();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.path().join("fabric.yaml")).unwrap();
    let cfg = dir.path().join("cluster.yaml");
    let with_sources: String = text
        .lines()
        .flat_map(|l| {
            let extra = l
                .trim_start()
                .starts_with("labels: {rack:")
                .then_some("    simulate: aws-p4d");
            std::iter::once(l).chain(extra)
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&cfg, with_sources + "\n").unwrap();
    let out = dir.path().join("out");
    assert_eq!(plan(&cfg, &out).status.code(), Some(0));
    let topology = std::fs::read_to_string(out.join("topology.conf")).unwrap();
    let patterns: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- host: \"")?.strip_suffix('"'))
        .collect();
    let mut slurm = Slurm::start(&topology, &patterns.join(","));
    let shown = slurm.show_topology().unwrap();
    assert!(
        !slurm.log().contains("switch configuration"),
        "{}\n{topology}",
        slurm.log()
    );
    assert!(
        !slurm.log().contains("no switch can reach all nodes"),
        "{}\n{topology}",
        slurm.log()
    );
    // Racks (the leaf groups) under their leaves under the two spines as one: the wires' tree.
    assert!(
        shown.contains("SwitchName=rack-ib1 Level=0") && shown.contains("SwitchName=ib1 Level=1"),
        "{shown}"
    );
    assert!(shown.contains("SwitchName=spines-1 Level=2"), "{shown}");
    assert!(
        shown.contains("SwitchName=rack-ib7 Level=0 LinkSpeed=1 Nodes=tank[1-2]"),
        "the hosts on spine ib7: {shown}"
    );
}
