//! Nodes over the operator's own `ssh` (openssh crate, native mux): their ssh_config,
//! ProxyJump, agent and known_hosts apply exactly as for `ssh node`. Host keys are checked
//! strictly (unknown or changed: refused). Every remote argument is shell-quoted by the
//! openssh crate; hostnames, users and paths were validated when cluster.yaml was read.

use crate::config::{NodeSpec, SshDefaults};
use crate::model::{Deploy, Failure, FailureKind};
use openssh::{ControlPersist, KnownHosts, Session, SessionBuilder, Stdio};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// A probe answer larger than this is refused (a real snapshot is well under 1 MiB).
pub(crate) const MAX_ANSWER_BYTES: u64 = 16 * 1024 * 1024;
/// The node-side timeout of a remote command exceeds ours by this much, so ours fires first.
const REMOTE_TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// How to reach nodes over ssh, resolved once per command.
#[derive(Debug, Clone)]
pub(crate) struct SshOptions {
    pub(crate) settings: SshDefaults,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// The binary copied to nodes (read only when some node uses ssh), being read and hashed
    /// while the first connections are set up.
    pub(crate) remote_binary: PendingBinary,
    /// Connection set-ups in flight, bounded apart from the commands (`ssh.max_startups`).
    pub(crate) startups: Arc<tokio::sync::Semaphore>,
}

/// The binary to deploy, read once: its bytes and SHA-256.
#[derive(Debug)]
pub(crate) struct LocalBinary {
    pub(crate) bytes: Vec<u8>,
    pub(crate) sha256: String,
}

impl LocalBinary {
    pub(crate) fn load(path: &Path) -> std::io::Result<Self> {
        let bytes = std::fs::read(path)?;
        let sha256 = crate::digest::sha256_hex(&bytes);
        Ok(LocalBinary { bytes, sha256 })
    }

    /// [`LocalBinary::load`] once per process and path: a command that fans out many times
    /// (`apply`: stage, every benchmark run, promote) reads and hashes the binary once.
    pub(crate) fn load_cached(path: &Path) -> std::io::Result<Arc<Self>> {
        static CACHE: std::sync::Mutex<Option<(std::path::PathBuf, Arc<LocalBinary>)>> = std::sync::Mutex::new(None);
        let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, b)) = cache.as_ref().filter(|(p, _)| p == path) {
            return Ok(Arc::clone(b));
        }
        let binary = Arc::new(Self::load(path)?);
        *cache = Some((path.to_path_buf(), Arc::clone(&binary)));
        Ok(binary)
    }

    /// Where it lives on a node: one directory per version and content, so upgrades never
    /// overwrite a binary another run is using.
    pub(crate) fn remote_dir(&self, base: &str) -> String {
        format!(
            "{}/{}-{}",
            base.trim_end_matches('/'),
            env!("CARGO_PKG_VERSION"),
            &self.sha256[..16]
        )
    }
}

/// The binary to deploy as it is read and hashed on a thread of its own: a command's first
/// ssh set-ups (key exchange, authentication) run meanwhile instead of after it, and a node
/// waits for it only once its session is up.
#[derive(Debug, Clone)]
pub(crate) struct PendingBinary(tokio::sync::watch::Receiver<Option<Result<Arc<LocalBinary>, Failure>>>);

impl PendingBinary {
    /// Start reading `path` ([`LocalBinary::load_cached`]).
    pub(crate) fn start(path: std::path::PathBuf) -> PendingBinary {
        let (tx, rx) = tokio::sync::watch::channel(None);
        std::thread::spawn(move || {
            let loaded = LocalBinary::load_cached(&path)
                .map_err(|e| Failure::new(FailureKind::DeployFailed, format!("reading {}: {e}", path.display())));
            let _ = tx.send(Some(loaded));
        });
        PendingBinary(rx)
    }

    /// The binary, once read; a failure to read it fails the node that needed it.
    pub(crate) async fn get(&self) -> Result<Arc<LocalBinary>, Failure> {
        let mut rx = self.0.clone();
        let ready = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| Failure::new(FailureKind::Internal, "the thread reading the binary ended early"))?;
        match &*ready {
            Some(Ok(b)) => Ok(Arc::clone(b)),
            Some(Err(f)) => Err(f.clone()),
            None => Err(Failure::new(FailureKind::Internal, "the binary was not read")),
        }
    }
}

/// A private directory (mode 0700) for this run's control sockets, removed at the end.
#[derive(Debug, Clone)]
pub(crate) struct ControlDir(Arc<tempfile::TempDir>);

impl ControlDir {
    pub(crate) fn create() -> Option<Self> {
        // Socket paths are limited to ~108 bytes: stay in /tmp, not a deep home directory.
        tempfile::Builder::new()
            .prefix("topo-tune-ssh-")
            .tempdir_in("/tmp")
            .ok()
            .map(|d| ControlDir(Arc::new(d)))
    }
    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Deploy the binary and run `topo-tune node KIND` on the node with `request` on its stdin;
/// its stdout (the node's report) comes back. Connection attempts are counted.
pub(crate) async fn call(
    node: &NodeSpec,
    opts: &SshOptions,
    dir: &ControlDir,
    kind: &str,
    request: &[u8],
) -> (Result<(Vec<u8>, Deploy), Failure>, u32) {
    let (session, attempts) = match connect_with_retry(node, opts, dir).await {
        Ok(x) => x,
        Err((f, attempts)) => return (Err(f), attempts),
    };
    let result = async {
        let binary = opts.remote_binary.get().await?;
        let dir = binary.remote_dir(&opts.settings.remote_dir);
        let path = format!("{dir}/topo-tune");
        let args = ["node", kind];
        let tool = Tool {
            node,
            opts,
            binary: &binary,
        };
        // One round trip when the binary is already there; else upload (verified), then run.
        if let Some(out) = tool.run(&session, &path, &args, Some(request), Some(&dir)).await? {
            return Ok((out.stdout, Deploy::Reused));
        }
        tracing::info!(
            host = node.host,
            dir,
            bytes = binary.bytes.len(),
            "binary not on the node: uploading"
        );
        deploy(&session, opts, &binary, &dir).await?;
        let out = tool
            .run(&session, &path, &args, Some(request), None)
            .await?
            .ok_or_else(|| Failure::new(FailureKind::Internal, "no output from the node"))?;
        Ok((out.stdout, Deploy::Uploaded))
    }
    .await;
    // Closing the master ends every remote process of this session, including a hung one.
    let _ = timeout(Duration::from_secs(5), session.close()).await;
    (result, attempts)
}

/// 200–700 ms, different per host and per call (no shared rhythm between nodes).
fn retry_delay(host: &str) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = crate::digest::sha256_hex(format!("{host}{nanos}").as_bytes());
    let jitter = u64::from_str_radix(&seed[..4], 16).unwrap_or(0) % 500;
    Duration::from_millis(200 + jitter)
}

/// One retry when the network, not the credentials, failed.
async fn connect_with_retry(
    node: &NodeSpec,
    opts: &SshOptions,
    dir: &ControlDir,
) -> Result<(Session, u32), (Failure, u32)> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        // The timeout starts once a set-up slot is ours: waiting for a slot is not the node's fault.
        let permit = opts.startups.acquire().await;
        tracing::debug!(host = node.host, attempt = attempts, "ssh set-up");
        let connected = connect(node, opts, dir).await;
        drop(permit);
        match connected {
            Ok(s) => return Ok((s, attempts)),
            Err(f)
                if attempts < 2
                    && matches!(
                        f.kind,
                        FailureKind::ConnectRefused | FailureKind::ConnectTimeout | FailureKind::SshFailed
                    ) =>
            {
                // Jittered, so nodes refused together (sshd's MaxStartups) do not retry together.
                let delay = retry_delay(&node.host);
                tracing::info!(
                    host = node.host,
                    kind = f.kind.name(),
                    delay_ms = delay.as_millis() as u64,
                    "retrying: {}",
                    f.message
                );
                tokio::time::sleep(delay).await;
            }
            Err(f) => return Err((f, attempts)),
        }
    }
}

async fn connect(node: &NodeSpec, opts: &SshOptions, dir: &ControlDir) -> Result<Session, Failure> {
    let settings = &opts.settings;
    let mut b = SessionBuilder::default();
    b.known_hosts_check(KnownHosts::Strict)
        .connect_timeout(opts.connect_timeout)
        .server_alive_interval(Duration::from_secs(15))
        .control_directory(dir.path())
        .control_persist(ControlPersist::IdleFor(
            NonZeroUsize::new(settings.control_persist_s as usize).unwrap_or(NonZeroUsize::MIN),
        ));
    if let Some(f) = &settings.config_file {
        b.config_file(f);
    }
    if let Some(k) = &settings.known_hosts {
        b.user_known_hosts_file(k);
    }
    if let Some(i) = &settings.identity_file {
        b.keyfile(i);
    }
    if let Some(u) = &node.user {
        b.user(u.clone());
    }
    if let Some(p) = node.port {
        b.port(p);
    }
    // ssh's own ConnectTimeout covers the TCP connect; this bounds the whole set-up (key
    // exchange and authentication too), and the message says which limit it was.
    let limit = opts.connect_timeout + Duration::from_secs(5);
    match timeout(limit, b.connect_mux(&node.host)).await {
        Err(_) => Err(Failure::new(
            FailureKind::ConnectTimeout,
            format!(
                "no ssh session within {} s (connect_timeout {} s, plus 5 s for key exchange and authentication)",
                limit.as_secs(),
                opts.connect_timeout.as_secs()
            ),
        )),
        Ok(Err(e)) => Err(classify(&node.host, &e)),
        Ok(Ok(s)) => Ok(s),
    }
}

/// Turn ssh's words into a failure kind and a message an operator can act on.
pub(crate) fn classify(host: &str, err: &openssh::Error) -> Failure {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    let detail = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('@'))
        .unwrap_or("")
        .to_string();
    let has = |needle: &str| text.contains(needle);
    if has("REMOTE HOST IDENTIFICATION HAS CHANGED") || (has("Host key for") && has("has changed")) {
        Failure::new(FailureKind::HostKeyChanged, format!("host key of {host} differs from known_hosts: refused, nothing was sent (if the node was reinstalled, check its new key, then `ssh-keygen -R {host}`)"))
    } else if has("Host key verification failed") || has("host key is known") {
        Failure::new(FailureKind::HostKeyUnknown, format!("host key of {host} is not in known_hosts: refused (add it after checking its fingerprint, e.g. `ssh {host}` once)"))
    } else if has("Permission denied") || has("Too many authentication failures") {
        Failure::new(
            FailureKind::AuthRejected,
            format!("authentication rejected by {host}: {detail}"),
        )
    } else if has("Connection refused") {
        Failure::new(
            FailureKind::ConnectRefused,
            format!("connection refused by {host} (is sshd running, is the port right?)"),
        )
    } else if has("timed out") {
        Failure::new(FailureKind::ConnectTimeout, format!("connection to {host} timed out"))
    } else if has("Could not resolve hostname") || has("Name or service not known") {
        Failure::new(FailureKind::UnknownHost, format!("{host} does not resolve"))
    } else {
        Failure::new(FailureKind::SshFailed, format!("ssh to {host} failed: {detail}"))
    }
}

struct RemoteOutput {
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
    truncated: bool,
}

/// Run one remote command (already quoted by openssh) with a timeout and an output limit.
async fn run(
    session: &Session,
    program: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
    limit: u64,
    within: Duration,
) -> Result<RemoteOutput, Failure> {
    let work = async {
        // Bounded on the node too (coreutils `timeout`, a little past our own limit): if
        // topo-tune is killed, the remote command still ends, the control master goes idle
        // and exits after `control_persist`. Nothing outlives a run by more than that.
        let remote_limit = (within + REMOTE_TIMEOUT_GRACE).as_secs().to_string();
        let mut cmd = session.command("timeout");
        cmd.args(["-k", "5", remote_limit.as_str(), program])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd
            .spawn()
            .await
            .map_err(|e| Failure::new(FailureKind::SshFailed, format!("starting `{program}`: {e}")))?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin().take()) {
            pipe.write_all(data)
                .await
                .map_err(|e| Failure::new(FailureKind::SshFailed, format!("sending `{program}` its input: {e}")))?;
            pipe.shutdown()
                .await
                .map_err(|e| Failure::new(FailureKind::SshFailed, format!("sending `{program}` its input: {e}")))?;
        }
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let out_pipe = child.stdout().take();
        let err_pipe = child.stderr().take();
        let read_out = async {
            if let Some(p) = out_pipe {
                let _ = p.take(limit + 1).read_to_end(&mut stdout).await;
            }
        };
        let read_err = async {
            if let Some(p) = err_pipe {
                let _ = p.take(64 * 1024).read_to_end(&mut stderr).await;
            }
        };
        tokio::join!(read_out, read_err);
        let truncated = stdout.len() as u64 > limit;
        if truncated {
            // Do not wait for the rest: the session close below ends the remote process.
            return Ok(RemoteOutput {
                status: None,
                stdout,
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
                truncated,
            });
        }
        // openssh reports exit code 127 ("command not found", also what ld.so returns for a
        // missing library) as an error; keep it a status so stderr can be diagnosed.
        let status = match child.wait().await {
            Ok(s) => s.code(),
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => Some(127),
            Err(e) => return Err(Failure::new(FailureKind::SshFailed, format!("`{program}`: {e}"))),
        };
        Ok(RemoteOutput {
            status,
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            truncated,
        })
    };
    match timeout(within, work).await {
        Ok(r) => r,
        Err(_) => Err(Failure::new(
            FailureKind::CommandTimeout,
            format!("`{program}` ran past the command timeout ({} s)", within.as_secs()),
        )),
    }
}

/// Installs the binary with a fixed script: `$1` is the (validated) directory, `$2` the
/// expected sha256. The file is written under a temporary name, its checksum verified on the
/// node, and only then renamed into place: a half-copied or corrupted binary is never at the
/// content-addressed path, which later runs trust by its name and size.
const INSTALL_SCRIPT: &str = r#"umask 022 && mkdir -p -- "$1" && t="$1/.topo-tune.$$" && cat > "$t" && chmod 755 "$t" || exit 1
command -v sha256sum > /dev/null || { rm -f -- "$t"; exit 127; }
h=$(sha256sum < "$t") && h=${h%% *}
[ "$h" = "$2" ] || { rm -f -- "$t"; echo "the copied binary does not verify (sha256 $h, expected $2)" >&2; exit 1; }
p="$1/topo-tune"
if ln -- "$t" "$p" 2>/dev/null || { [ -f "$p" ] && [ "$(wc -c < "$p")" -eq "$(wc -c < "$t")" ]; }; then rm -f -- "$t"; else mv -f -- "$t" "$p"; fi"#;

/// Exit status of [`RUN_IF_DEPLOYED`] when the binary is not at its path (or not whole).
const NOT_DEPLOYED: i32 = 197;

/// Runs the rest of its arguments only when `$1/topo-tune` exists with the size `$2`. The
/// directory's name is the binary's version and content hash, and a file only gets there
/// verified (INSTALL_SCRIPT), so name and size identify it without hashing it on every run.
const RUN_IF_DEPLOYED: &str =
    r#"p="$1/topo-tune"; s="$2"; shift 2; [ -f "$p" ] && [ "$(wc -c < "$p")" -eq "$s" ] || exit 197; exec "$@""#;

/// Upload the binary to `dir` (checksum verified on the node before it is put in place). The
/// verified file is linked into place only where none is yet (`ln` never replaces): nodes
/// sharing a home directory over NFS upload at once, and replacing the file under a node that
/// already runs it would unlink the binary its probe re-executes. A file of the wrong size (a
/// broken copy) is replaced.
async fn deploy(session: &Session, opts: &SshOptions, binary: &LocalBinary, dir: &str) -> Result<(), Failure> {
    let out = run(
        session,
        "sh",
        &["-c", INSTALL_SCRIPT, "topo-tune-install", dir, &binary.sha256],
        Some(&binary.bytes),
        64 * 1024,
        opts.command_timeout,
    )
    .await?;
    match out.status {
        Some(0) => Ok(()),
        Some(127) => Err(Failure::new(
            FailureKind::DeployFailed,
            "sha256sum or timeout is not installed on the node (coreutils)",
        )),
        _ => Err(Failure::new(
            FailureKind::DeployFailed,
            format!("copying the probe binary to {dir} failed: {}", last_line(&out.stderr)),
        )),
    }
}

/// The deployed binary on one node.
struct Tool<'a> {
    node: &'a NodeSpec,
    opts: &'a SshOptions,
    binary: &'a LocalBinary,
}

impl Tool<'_> {
    /// Run the deployed binary (through `sudo -n` when configured); non-zero exits are diagnosed.
    /// With `deployed_in`, only if the binary is there ([`RUN_IF_DEPLOYED`]): `None` when not.
    async fn run(
        &self,
        session: &Session,
        path: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
        deployed_in: Option<&str>,
    ) -> Result<Option<RemoteOutput>, Failure> {
        let Tool { node, opts, binary } = self;
        let mut argv: Vec<&str> = Vec::new();
        if opts.settings.sudo {
            argv.extend(["sudo", "-n", "--"]);
        }
        argv.push(path);
        argv.extend_from_slice(args);
        let size = binary.bytes.len().to_string();
        if let Some(dir) = deployed_in {
            argv.splice(0..0, ["-c", RUN_IF_DEPLOYED, "topo-tune-run", dir, size.as_str()]);
            argv.insert(0, "sh");
        }
        let out = run(
            session,
            argv[0],
            &argv[1..],
            stdin,
            MAX_ANSWER_BYTES,
            opts.command_timeout,
        )
        .await?;
        if deployed_in.is_some() && out.status == Some(NOT_DEPLOYED) && out.stdout.is_empty() {
            return Ok(None);
        }
        if out.truncated {
            return Err(Failure::new(
                FailureKind::AnswerTooLarge,
                format!(
                    "the answer was larger than {} MiB: refused",
                    MAX_ANSWER_BYTES / (1024 * 1024)
                ),
            ));
        }
        if out.status != Some(0) {
            return Err(diagnose(out.status, &out.stderr, &node.host));
        }
        Ok(Some(out))
    }
}

/// Name the missing piece when the probe cannot start on a node.
pub(crate) fn diagnose(status: Option<i32>, stderr: &str, host: &str) -> Failure {
    let lib = |name: &str| stderr.contains("error while loading shared libraries") && stderr.contains(name);
    if lib("libhwloc") {
        Failure::new(FailureKind::MissingLibrary, format!("{host} lacks libhwloc 2.x, which the probe needs: install libhwloc15 (Debian/Ubuntu) or hwloc-libs (RHEL/Rocky)"))
    } else if lib("libudev") {
        Failure::new(
            FailureKind::MissingLibrary,
            format!("{host} lacks libudev: install libudev1 (Debian/Ubuntu) or systemd-libs (RHEL/Rocky)"),
        )
    } else if stderr.contains("GLIBC_") && stderr.contains("not found") {
        Failure::new(
            FailureKind::MissingLibrary,
            format!(
                "{host} has a glibc older than 2.34, which this topo-tune build needs: {}",
                last_line(stderr)
            ),
        )
    } else if stderr.contains("Exec format error") || stderr.contains("cannot execute binary file") {
        Failure::new(
            FailureKind::WrongPlatform,
            format!(
                "{host} cannot run this x86-64 Linux build (another architecture?): {}",
                last_line(stderr)
            ),
        )
    } else if stderr.contains("a password is required") || stderr.contains("sudo:") {
        Failure::new(
            FailureKind::ProbeFailed,
            format!(
                "sudo on {host} needs a password or is not allowed (ssh.sudo uses `sudo -n`): {}",
                last_line(stderr)
            ),
        )
    } else {
        let code = status.map_or("a signal".to_string(), |c| format!("code {c}"));
        Failure::new(
            FailureKind::ProbeFailed,
            format!("the probe on {host} exited with {code}: {}", last_line(stderr)),
        )
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("(no message)")
        .chars()
        .take(300)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_jittered_within_bounds() {
        let delays: std::collections::BTreeSet<Duration> = (0..50).map(|i| retry_delay(&format!("gpu{i}"))).collect();
        assert!(delays.iter().all(|d| (200..700).contains(&d.as_millis())));
        assert!(delays.len() > 10, "not one shared rhythm: {delays:?}");
    }

    #[test]
    fn missing_libraries_are_named() {
        let f = diagnose(Some(127), "topo-tune: error while loading shared libraries: libhwloc.so.15: cannot open shared object file: No such file or directory", "n1");
        assert_eq!(f.kind, FailureKind::MissingLibrary);
        assert!(f.message.contains("libhwloc15") && f.message.contains("hwloc-libs"));
        let f = diagnose(
            Some(1),
            "./topo-tune: /lib64/libc.so.6: version `GLIBC_2.34' not found (required by ./topo-tune)",
            "n1",
        );
        assert_eq!(f.kind, FailureKind::MissingLibrary);
        let f = diagnose(Some(126), "sh: 1: ./topo-tune: Exec format error", "n1");
        assert_eq!(f.kind, FailureKind::WrongPlatform);
        let f = diagnose(Some(65), "error: --fsroot /x: not a sysfs/procfs tree", "n1");
        assert_eq!(f.kind, FailureKind::ProbeFailed);
        assert!(f.message.contains("code 65") && f.message.contains("not a sysfs"));
    }

    #[test]
    fn a_pending_binary_is_read_once_and_its_failure_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tool");
        std::fs::write(&path, b"abc").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let pending = PendingBinary::start(path.clone());
        let (a, b) = rt.block_on(async { (pending.get().await, pending.clone().get().await) });
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.sha256, crate::digest::sha256_hex(b"abc"));
        assert!(Arc::ptr_eq(&a, &b), "read once");
        let missing = PendingBinary::start(dir.path().join("gone"));
        let f = rt.block_on(missing.get()).unwrap_err();
        assert_eq!(f.kind, FailureKind::DeployFailed);
        assert!(f.message.contains("gone"), "{}", f.message);
    }

    /// The install script on this machine's `sh`: a verified copy goes into place when none
    /// is there, never replaces a whole one (a node may be running it), and replaces a broken
    /// one.
    #[test]
    fn the_install_script_never_replaces_a_whole_binary() {
        use std::io::Write as _;
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("topo-tune");
        let body = b"#!/bin/sh\necho hello\n".repeat(100);
        let sha = crate::digest::sha256_hex(&body);
        let install = || {
            let mut child = std::process::Command::new("sh")
                .args(["-c", INSTALL_SCRIPT, "topo-tune-install"])
                .arg(dir.path())
                .arg(&sha)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&body).unwrap();
            assert!(child.wait().unwrap().success());
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(left, [std::ffi::OsString::from("topo-tune")], "no temporary file left");
        };
        install();
        assert_eq!(std::fs::read(&target).unwrap(), body);
        let inode = std::fs::metadata(&target).unwrap().ino();
        install();
        assert_eq!(
            std::fs::metadata(&target).unwrap().ino(),
            inode,
            "a whole binary is kept, not replaced"
        );
        std::fs::write(&target, &body[..10]).unwrap();
        install();
        assert_eq!(std::fs::read(&target).unwrap(), body, "a broken copy is replaced");
    }

    #[test]
    fn remote_dir_is_per_version_and_content() {
        let b = LocalBinary {
            bytes: vec![],
            sha256: "0123456789abcdef0123".into(),
        };
        assert_eq!(
            b.remote_dir(".cache/topo-tune/"),
            format!(".cache/topo-tune/{}-0123456789abcdef", env!("CARGO_PKG_VERSION"))
        );
    }
}
