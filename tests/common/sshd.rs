//! Real `sshd` instances on loopback, one per pretend node, for the transport tests.
//!
//! How a node "is" a different machine: every sshd has its own host key, port and
//! `sshd_config`; its `SetEnv` line sets `TOPO_TUNE_FSROOT` (a fake `/sys` + `/proc` tree) or
//! `TOPO_TUNE_FROM_HWLOC_XML` (a real machine's hwloc export) for the sessions it starts, and
//! `topo-tune node` reads those variables. So the deployed binary really runs over ssh, on a
//! machine description of the test's choosing. Misbehaving nodes get a `ForceCommand`
//! wrapper (hang, garbage, 100 MB answer) or a wrong key.
//!
//! The client side is strict, as in production: `StrictHostKeyChecking yes` with a generated
//! known_hosts, `BatchMode` (set by topo-tune), and a generated client key.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a node presents, or how it misbehaves.
#[derive(Clone)]
pub(crate) enum Node {
    /// Probe answers from this fake tree.
    Fsroot(PathBuf),
    /// The same, with every command it is asked to run logged (`commands_log`).
    LoggedFsroot(PathBuf),
    /// Probe answers from this hwloc XML file.
    HwlocXml(PathBuf),
    /// Nothing listens on the port.
    ClosedPort,
    /// sshd runs, but known_hosts holds another key for it.
    ChangedHostKey,
    /// sshd runs, but known_hosts has no entry for it.
    UnknownHostKey,
    /// sshd runs, but does not accept our key.
    WrongClientKey,
    /// The probe never answers.
    HangingProbe,
    /// The probe prints something that is not JSON.
    GarbageAnswer,
    /// The probe prints 100 MB.
    HugeAnswer,
    /// The real node side, answering from this fake tree after 10 minutes (needs
    /// `--features fault-injection`): a run to interrupt.
    SlowProbe(PathBuf),
}

pub(crate) struct SshCluster {
    pub dir: tempfile::TempDir,
    pub ssh_config: PathBuf,
    pub names: Vec<String>,
    children: Vec<Child>,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(path: &Path) -> String {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "topo-tune-test", "-f"])
        .arg(path));
    fs::read_to_string(path.with_extension("pub"))
        .unwrap()
        .trim()
        .to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn sshd_path() -> PathBuf {
    let p = PathBuf::from("/usr/sbin/sshd");
    assert!(
        p.exists(),
        "sshd not found: run ./scripts/setup.sh (installs openssh-server)"
    );
    p
}

impl SshCluster {
    pub(crate) fn start(nodes: &[Node]) -> SshCluster {
        // sshd insists on its privilege-separation directory.
        fs::create_dir_all("/run/sshd").expect("creating /run/sshd needs root (the CI runs as root)");
        let dir = tempfile::Builder::new().prefix("tt-sshd-").tempdir_in("/tmp").unwrap();
        let client_pub = keygen(&dir.path().join("client_key"));
        let stranger_pub = keygen(&dir.path().join("stranger_key"));
        let wrapper = write_wrapper(dir.path());
        let mut ssh_config = String::new();
        let mut known_hosts = String::new();
        let mut children = Vec::new();
        let mut names = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let name = format!("node{}", i + 1);
            let nd = dir.path().join(&name);
            fs::create_dir_all(&nd).unwrap();
            let port = free_port();
            let host_pub = keygen(&nd.join("hostkey"));
            let key_for_known_hosts = match node {
                Node::ChangedHostKey => keygen(&nd.join("otherkey")),
                _ => host_pub,
            };
            if !matches!(node, Node::UnknownHostKey) {
                let key: Vec<&str> = key_for_known_hosts.split_whitespace().take(2).collect();
                writeln!(known_hosts, "[127.0.0.1]:{port} {}", key.join(" ")).unwrap();
            }
            let authorized = if matches!(node, Node::WrongClientKey) {
                &stranger_pub
            } else {
                &client_pub
            };
            fs::write(nd.join("authorized_keys"), format!("{authorized}\n")).unwrap();
            let mut cfg = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {hk}\nPidFile {nd}/sshd.pid\nAuthorizedKeysFile {nd}/authorized_keys\n\
                 StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nLogLevel ERROR\nMaxStartups 200\nMaxSessions 50\n",
                hk = nd.join("hostkey").display(),
                nd = nd.display(),
            );
            cfg.push_str(&presentation(node, &nd, &wrapper));
            fs::write(nd.join("sshd_config"), cfg).unwrap();
            if !matches!(node, Node::ClosedPort) {
                let child = Command::new(sshd_path())
                    .args(["-D", "-e", "-f"])
                    .arg(nd.join("sshd_config"))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(fs::File::create(nd.join("sshd.log")).unwrap())
                    .spawn()
                    .expect("starting sshd");
                children.push(child);
                wait_for_port(port, &nd);
            }
            writeln!(
                ssh_config,
                "Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {kh}\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                key = dir.path().join("client_key").display(),
                kh = dir.path().join("known_hosts").display(),
            )
            .unwrap();
            names.push(name);
        }
        fs::write(dir.path().join("known_hosts"), known_hosts).unwrap();
        let ssh_config_path = dir.path().join("ssh_config");
        fs::write(&ssh_config_path, ssh_config).unwrap();
        SshCluster {
            dir,
            ssh_config: ssh_config_path,
            names,
            children,
        }
    }

    /// A cluster.yaml naming every node by its ssh_config alias.
    pub(crate) fn cluster_yaml(&self, extra_ssh: &str) -> PathBuf {
        let mut y = format!(
            "ssh:\n  config_file: {}\n  remote_dir: {}\n{extra_ssh}nodes:\n",
            self.ssh_config.display(),
            self.dir.path().join("remote-cache").display()
        );
        for n in &self.names {
            writeln!(y, "  - host: {n}\n    labels: {{rack: rack-1}}").unwrap();
        }
        let p = self.dir.path().join("cluster.yaml");
        fs::write(&p, y).unwrap();
        p
    }

    pub(crate) fn commands_log(&self, node: usize) -> Option<String> {
        fs::read_to_string(self.dir.path().join(format!("node{node}/commands.log"))).ok()
    }
}

impl Drop for SshCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The sshd_config lines that make a node present a machine, or misbehave.
fn presentation(node: &Node, nd: &Path, wrapper: &Path) -> String {
    let force = |mode: &str| {
        format!(
            "SetEnv TT_MODE={mode} TT_LOG={}/commands.log\nForceCommand {}\n",
            nd.display(),
            wrapper.display()
        )
    };
    match node {
        // Reads from the fake tree; writes (init's write phase) land in `<tree>/written`.
        Node::Fsroot(p) => format!(
            "SetEnv TOPO_TUNE_FSROOT={} TOPO_TUNE_WRITE_ROOT={}/written\n",
            p.display(),
            p.display()
        ),
        Node::LoggedFsroot(p) => format!(
            "SetEnv TOPO_TUNE_FSROOT={} TOPO_TUNE_WRITE_ROOT={}/written TT_MODE=pass TT_LOG={}/commands.log\nForceCommand {}\n",
            p.display(),
            p.display(),
            nd.display(),
            wrapper.display()
        ),
        Node::HwlocXml(p) => format!("SetEnv TOPO_TUNE_FROM_HWLOC_XML={}\n", p.display()),
        Node::SlowProbe(p) => format!("SetEnv TOPO_TUNE_FSROOT={} TOPO_TUNE_NODE_DELAY_S=600\n", p.display()),
        Node::HangingProbe => force("hang"),
        Node::GarbageAnswer => force("garbage"),
        Node::HugeAnswer => force("huge"),
        // Records every command it is asked to run: proves that nothing was sent.
        Node::ChangedHostKey | Node::UnknownHostKey | Node::WrongClientKey => force("pass"),
        Node::ClosedPort => String::new(),
    }
}

fn wait_for_port(port: u16, nd: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "sshd on port {port} did not start: {}",
        fs::read_to_string(nd.join("sshd.log")).unwrap_or_default()
    );
}

/// The ForceCommand of misbehaving nodes: logs the command, then misbehaves only for the
/// probe itself (deploying works, as on a real node whose probe is the problem).
fn write_wrapper(dir: &Path) -> PathBuf {
    let p = dir.join("wrapper.sh");
    fs::write(
        &p,
        r#"#!/bin/sh
printf '%s\n' "$SSH_ORIGINAL_COMMAND" >> "$TT_LOG"
case "$TT_MODE:$SSH_ORIGINAL_COMMAND" in
  # The probe binary itself hangs (whatever wraps it, e.g. `timeout`, still applies).
  hang:*"/topo-tune node probe"*) exec /bin/sh -c "$(printf '%s' "$SSH_ORIGINAL_COMMAND" | sed 's# [^ ]*/topo-tune node probe.*# sleep 600#')" ;;
  garbage:*"/topo-tune node probe"*) echo "Welcome to gpu-node! Last login: yesterday"; exit 0 ;;
  huge:*"/topo-tune node probe"*) head -c 104857600 /dev/zero | tr '\0' x; exit 0 ;;
esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    p
}
