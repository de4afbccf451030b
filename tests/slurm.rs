//! Slurm: `plan --output-dir` writes topology.conf (and topology.yaml) and a SLURM_HOSTFILE in
//! Slurm's node names; Debian's own slurmctld (22.05, started on loopback with munge) reads the
//! topology.conf and `scontrol show topology` shows the tree.

use crate::common::topo_tune;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn plan(cfg: &Path, out: &Path) -> std::process::Output {
    topo_tune()
        .args(["--output", "json", "plan", "--cluster-config"])
        .arg(cfg)
        .arg("--output-dir")
        .arg(out)
        .output()
        .unwrap()
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

/// munged and slurmctld for one test, stopped on drop.
struct Slurm {
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Slurm {
    fn conf(&self) -> std::path::PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// Start munge and slurmctld on loopback with `topology` beside a slurm.conf naming `nodes`.
    fn start(topology: &str, nodes: &str) -> Slurm {
        for tool in ["/usr/sbin/slurmctld", "/usr/sbin/munged", "/usr/bin/scontrol"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: scripts/setup.sh installs slurmctld, slurm-client and munge"
            );
        }
        let dir = tempfile::Builder::new().prefix("tt-slurm-").tempdir().unwrap();
        let d = dir.path();
        for sub in ["state", "run", "log"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let key = d.join("munge.key");
        std::fs::write(&key, [7u8; 128]).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let socket = d.join("run/munge.sock");
        let munged = Command::new("/usr/sbin/munged")
            .arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", d.join("run/munged.pid").display()))
            .arg(format!("--log-file={}", d.join("log/munged.log").display()))
            .arg(format!("--seed-file={}", d.join("run/munge.seed").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut slurm = Slurm {
            dir,
            children: vec![munged],
        };
        let d = slurm.dir.path().to_path_buf();
        std::fs::write(
            slurm.conf(),
            format!(
                "ClusterName=tt\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={}\nSlurmdPort={}\nSlurmUser=root\n\
                 AuthType=auth/munge\nAuthInfo=socket={}\nStateSaveLocation={}/state\nSlurmctldPidFile={}/run/slurmctld.pid\n\
                 SlurmctldLogFile={}/log/slurmctld.log\nTopologyPlugin=topology/tree\nSelectType=select/cons_tres\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
                 NodeName={nodes} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\nPartitionName=all Nodes=ALL Default=YES State=UP\n",
                free_port(),
                free_port(),
                socket.display(),
                d.display(),
                d.display(),
                d.display()
            ),
        )
        .unwrap();
        std::fs::write(d.join("topology.conf"), topology).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let ctld = Command::new("/usr/sbin/slurmctld")
            .args(["-D", "-i", "-f"])
            .arg(slurm.conf())
            .env("SLURM_CONF", slurm.conf())
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
        loop {
            let o = Command::new("/usr/bin/scontrol")
                .args(["show", "topology"])
                .env("SLURM_CONF", self.conf())
                .output()
                .unwrap();
            if o.status.success() {
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
            .env("TOPO_TUNE", assert_cmd::cargo::cargo_bin("topo-tune"))
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
