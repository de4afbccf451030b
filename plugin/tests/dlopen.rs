//! The plugin as NCCL sees it: the shared object `dlopen`ed, its `ncclTunerPlugin_v5` and
//! `_v4` symbols looked up, `init` called with a communicator's shape and NCCL's logger,
//! `getCollInfo` with a cost table of NCCL's real shape (`float[7][3]`, passed as `float**`,
//! `-1.0` where NCCL will not run the pair: here CollNet, NVLS, NVLSTree and PAT, as NCCL 2.30
//! filled it for two ranks on one node), `finalize` at the end.
//!
//! Each case loads its own copy of the library (a fresh path is a fresh `dlopen`), so that
//! what the plugin says once per process is counted per case.

use nccl_tuner_topo_tune::{TunerV4, TunerV5, TunerV6};
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::path::PathBuf;
use std::sync::Mutex;

/// What the logger was told, by every loaded copy.
static LOGGED: Mutex<Vec<(c_int, String)>> = Mutex::new(Vec::new());

/// NCCL's logger is variadic; the plugin always calls it with the format `"%s"` and one
/// string, so on x86-64 and AArch64 Linux a function taking that one string receives it in
/// the same register (defining a variadic function needs nightly Rust).
unsafe extern "C" fn logger(
    level: c_int,
    _flags: c_ulong,
    _file: *const c_char,
    _line: c_int,
    fmt: *const c_char,
    text: *const c_char,
) {
    // SAFETY: the plugin passes two NUL-terminated strings.
    let (fmt, text) = unsafe { (CStr::from_ptr(fmt), CStr::from_ptr(text)) };
    assert_eq!(fmt.to_str().unwrap(), "%s");
    LOGGED
        .lock()
        .unwrap()
        .push((level, text.to_string_lossy().into_owned()));
}

fn nccl_logger() -> nccl_tuner_topo_tune::Logger {
    // SAFETY: see `logger`: same registers for the arguments the plugin passes.
    unsafe { std::mem::transmute::<*const (), nccl_tuner_topo_tune::Logger>(logger as *const ()) }
}

/// The plugin as a shared object, built once per test process from this crate's source with
/// `rustc --crate-type cdylib` (cargo builds a cdylib only for `cargo build`, not for the
/// tests; the crate has no dependencies, so rustc alone builds exactly what cargo ships).
fn library() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("topo-tune-tuner-build-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let so = dir.join("libnccl_tuner_topo_tune.so");
            let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
            let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
            let out = std::process::Command::new(rustc)
                .args([
                    "--edition",
                    "2021",
                    "--crate-type",
                    "cdylib",
                    "--crate-name",
                    "nccl_tuner_topo_tune",
                    "-C",
                    "opt-level=1",
                    "-o",
                ])
                .arg(&so)
                .arg(src)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            so
        })
        .clone()
}

/// A fresh copy of the plugin, loaded.
struct Plugin {
    _dir: tempfile_lite::Dir,
    lib: libloading::Library,
}

mod tempfile_lite {
    /// A directory removed on drop (no tempfile crate needed for one test).
    pub(crate) struct Dir(pub(crate) std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    pub(crate) fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("topo-tune-tuner-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Plugin {
    fn load(tag: &str) -> Plugin {
        let dir = tempfile_lite::new(tag);
        let copy = dir.0.join("libnccl-tuner-topo-tune.so");
        std::fs::copy(library(), &copy).unwrap();
        // SAFETY: our own library; its initialisers do nothing.
        let lib = unsafe { libloading::Library::new(&copy).unwrap() };
        Plugin { _dir: dir, lib }
    }

    fn v5(&self) -> &TunerV5 {
        // SAFETY: the symbol is a `TunerV5` static.
        unsafe { &**self.lib.get::<*const TunerV5>(b"ncclTunerPlugin_v5").unwrap() }
    }

    fn v6(&self) -> &TunerV6 {
        // SAFETY: the symbol is a `TunerV6` static.
        unsafe { &**self.lib.get::<*const TunerV6>(b"ncclTunerPlugin_v6").unwrap() }
    }

    fn v4(&self) -> &TunerV4 {
        // SAFETY: the symbol is a `TunerV4` static.
        unsafe { &**self.lib.get::<*const TunerV4>(b"ncclTunerPlugin_v4").unwrap() }
    }

    fn init(&self, nodes: usize, ranks: usize) -> *mut c_void {
        let mut ctx: *mut c_void = std::ptr::null_mut();
        // SAFETY: as NCCL calls it; null NVL info and constants are allowed.
        let rc = unsafe {
            (self.v5().init)(
                &mut ctx,
                7,
                ranks,
                nodes,
                Some(nccl_logger()),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        assert!(!ctx.is_null());
        ctx
    }
}

const TREE: usize = 0;
const RING: usize = 1;
const LL: usize = 0;
const LL128: usize = 1;
const SIMPLE: usize = 2;
const ALLREDUCE: c_int = 4;
const ALLGATHER: c_int = 2;

/// NCCL's table for two ranks on one node: Tree and Ring filled, the rest -1 (NCCL 2.30.7).
fn table() -> [[f32; 3]; 7] {
    let mut t = [[-1.0f32; 3]; 7];
    t[TREE] = [9.1, 11.4, 30.2];
    t[RING] = [8.6, 10.2, 24.9];
    t
}

/// What one call does: the table after it, and the channel count it set (0: NCCL's own).
fn call(p: &Plugin, ctx: *mut c_void, coll: c_int, bytes: usize, mut t: [[f32; 3]; 7]) -> ([[f32; 3]; 7], c_int) {
    let mut channels: c_int = 0;
    let ptr = t.as_mut_ptr().cast::<f32>().cast::<*mut f32>();
    // SAFETY: a float[7][3] passed as float**, as NCCL does.
    let rc = unsafe { (p.v5().get_coll_info)(ctx, coll, bytes, 1, ptr, 7, 3, 0, &mut channels) };
    assert_eq!(rc, 0, "getCollInfo never fails");
    (t, channels)
}

/// The environment is the process's: one case at a time sets NCCL_TUNER_CONFIG_FILE.
static ENV: Mutex<()> = Mutex::new(());

fn with_file<R>(text: Option<&[u8]>, f: impl FnOnce() -> R) -> R {
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile_lite::new("csv");
    let path = dir.0.join("nccl-tuner.csv");
    if let Some(t) = text {
        std::fs::write(&path, t).unwrap();
    }
    std::env::set_var("NCCL_TUNER_CONFIG_FILE", &path);
    let r = f();
    std::env::remove_var("NCCL_TUNER_CONFIG_FILE");
    r
}

fn logged(needle: &str) -> Vec<(c_int, String)> {
    LOGGED
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, t)| t.contains(needle))
        .cloned()
        .collect()
}

#[test]
fn every_symbol_is_exported_with_the_name() {
    let p = Plugin::load("symbols");
    // SAFETY: static C strings.
    unsafe {
        assert_eq!(CStr::from_ptr(p.v6().name).to_str().unwrap(), "topo-tune");
        assert_eq!(CStr::from_ptr(p.v5().name).to_str().unwrap(), "topo-tune");
        assert_eq!(CStr::from_ptr(p.v4().name).to_str().unwrap(), "topo-tune");
    }
    // v6: v5's functions and no getChunkSize (NULL: NCCL's own chunk size).
    assert!(p.v6().get_chunk_size.is_none());
    assert_eq!(p.v6().get_coll_info as usize, p.v5().get_coll_info as usize);
    // v4 works the same way through its own init.
    with_file(Some(b"allreduce,0,4096,ring,simple,-1,-1,-1\n"), || {
        let mut ctx: *mut c_void = std::ptr::null_mut();
        // SAFETY: as NCCL 2.24–2.27 call it.
        assert_eq!(unsafe { (p.v4().init)(2, 1, Some(nccl_logger()), &mut ctx) }, 0);
        let mut t = table();
        let mut ch = 0;
        let ptr = t.as_mut_ptr().cast::<f32>().cast::<*mut f32>();
        // SAFETY: as NCCL calls it.
        assert_eq!(
            unsafe { (p.v4().get_coll_info)(ctx, ALLREDUCE, 1024, 1, ptr, 7, 3, 0, &mut ch) },
            0
        );
        assert_eq!(t[RING][SIMPLE], 0.0);
        // SAFETY: the context init made.
        assert_eq!(unsafe { (p.v4().destroy)(ctx) }, 0);
    });
}

#[test]
fn a_rule_chooses_inside_its_range_and_nccl_chooses_outside() {
    let p = Plugin::load("rules");
    let csv = b"# topo-tune tune\nallreduce,1024,65536,ring,simple,8,1,2\nallreduce,0,1048576,tree,ll128,-1,-1,-1\nallgather,0,1048576,nvls,simple,-1,-1,-1\nallreduce,0,1048576,tree,ll,-1,4,32\n";
    with_file(Some(csv), || {
        let ctx = p.init(1, 2);
        // Inside the first rule (bounds inclusive): Ring/Simple made cheapest, 8 channels.
        for bytes in [1024, 4096, 65536] {
            let (t, ch) = call(&p, ctx, ALLREDUCE, bytes, table());
            assert_eq!((t[RING][SIMPLE], ch), (0.0, 8), "{bytes}");
            let mut rest = t;
            rest[RING][SIMPLE] = table()[RING][SIMPLE];
            assert_eq!(rest, table(), "only one entry changes");
        }
        // Past it the next line matches: Tree/LL128, NCCL's channel count.
        let (t, ch) = call(&p, ctx, ALLREDUCE, 65537, table());
        assert_eq!((t[TREE][LL128], ch), (0.0, 0));
        // Outside every range: nothing changes.
        assert_eq!(call(&p, ctx, ALLREDUCE, 1 << 30, table()), (table(), 0));
        // NVLS is -1 (NCCL will not run it): the rule is passed over, the table untouched.
        assert_eq!(call(&p, ctx, ALLGATHER, 4096, table()), (table(), 0));
        // The 4-node, 32-rank line is not for this communicator.
        let (t, _) = call(&p, ctx, ALLREDUCE, 1 << 20, table());
        assert_eq!(t[TREE][LL], table()[TREE][LL]);
        // SAFETY: the context init made.
        assert_eq!(unsafe { (p.v5().finalize)(ctx) }, 0);
        // Another shape: only the any-shape line applies.
        let other = p.init(4, 32);
        let (t, ch) = call(&p, other, ALLREDUCE, 4096, table());
        assert_eq!((t[TREE][LL128], t[RING][SIMPLE], ch), (0.0, table()[RING][SIMPLE], 0));
        // SAFETY: as above.
        unsafe { (p.v5().finalize)(other) };
    });
    assert_eq!(
        logged("4 rule(s)").len(),
        1,
        "said once per process, not per communicator"
    );
}

#[test]
fn a_bad_or_missing_file_keeps_nccls_choice_and_says_so_once() {
    let big = "allreduce,0,1,ring,ll,-1,-1,-1\n".repeat(1_000_000);
    let cases: Vec<(&str, Option<Vec<u8>>, &str)> = vec![
        (
            "bounds",
            Some(b"allreduce,99,1,ring,ll,-1,-1,-1\n".to_vec()),
            "above max_bytes",
        ),
        ("million", Some(big.into_bytes()), "larger than"),
        ("missing", None, "No such file"),
    ];
    for (tag, text, needle) in cases {
        let p = Plugin::load(tag);
        with_file(text.as_deref(), || {
            for _ in 0..3 {
                let ctx = p.init(1, 2);
                assert_eq!(call(&p, ctx, ALLREDUCE, 4096, table()), (table(), 0), "{tag}");
                // SAFETY: the context init made.
                unsafe { (p.v5().finalize)(ctx) };
            }
        });
        let said = logged(needle);
        assert_eq!(said.len(), 1, "{tag}: one line, not one per communicator: {said:?}");
        assert_eq!(said[0].0, 2, "{tag}: a warning");
    }
}

/// A line the plugin cannot read is refused alone (said once, with its number); the lines
/// around it still apply — and the example's own formatting (CR LF, a trailing comma, an
/// indented comment, channels 0 for NCCL's own) reads as the example reads it.
#[test]
fn a_bad_line_is_refused_alone_and_the_examples_formatting_reads() {
    let p = Plugin::load("lines");
    let csv = b"  # written by hand\r\nallreduce,0,4096,ring,simple,0,-1,-1,\r\nalltoall,0,1,ring,ll,-1,-1,-1\r\n   \r\nallreduce,4097,65536,tree,ll,8,-1,-1\r\n";
    with_file(Some(csv), || {
        for _ in 0..2 {
            let ctx = p.init(1, 2);
            let (t, ch) = call(&p, ctx, ALLREDUCE, 1024, table());
            assert_eq!((t[RING][SIMPLE], ch), (0.0, 0), "channels 0: NCCL's own count");
            let (t, ch) = call(&p, ctx, ALLREDUCE, 8192, table());
            assert_eq!((t[TREE][LL], ch), (0.0, 8), "the line after the refused one applies");
            // SAFETY: the context init made.
            unsafe { (p.v5().finalize)(ctx) };
        }
    });
    let said = logged("line 3: unknown collective");
    assert_eq!(said.len(), 1, "once per process: {said:?}");
    assert_eq!(said[0].0, 2);
    assert_eq!(logged("2 rule(s) from").len(), 1);
}

#[test]
fn a_proc_file_is_refused() {
    let p = Plugin::load("proc");
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("NCCL_TUNER_CONFIG_FILE", "/proc/self/status");
    let ctx = p.init(1, 2);
    assert_eq!(call(&p, ctx, ALLREDUCE, 4096, table()), (table(), 0));
    std::env::remove_var("NCCL_TUNER_CONFIG_FILE");
    assert_eq!(logged("/proc/self/status: a /proc or /sys file").len(), 1);
}

#[test]
fn a_fifo_is_refused_without_blocking_init() {
    let p = Plugin::load("fifo");
    let dir = tempfile_lite::new("fifo-dir");
    let fifo = dir.0.join("nccl-tuner.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    std::env::set_var("NCCL_TUNER_CONFIG_FILE", &fifo);
    let started = std::time::Instant::now();
    let ctx = p.init(1, 2);
    assert!(started.elapsed().as_secs() < 5, "init did not block on the FIFO");
    assert_eq!(call(&p, ctx, ALLREDUCE, 4096, table()), (table(), 0));
    std::env::remove_var("NCCL_TUNER_CONFIG_FILE");
    assert_eq!(logged("not a regular file").len(), 1);
}

#[test]
fn null_arguments_change_nothing_and_never_fail() {
    let p = Plugin::load("null");
    let mut ch = 0;
    // SAFETY: NCCL never does this; the plugin must survive it all the same.
    unsafe {
        assert_eq!(
            (p.v5().get_coll_info)(
                std::ptr::null_mut(),
                ALLREDUCE,
                1,
                1,
                std::ptr::null_mut(),
                7,
                3,
                0,
                &mut ch
            ),
            0
        );
        assert_eq!((p.v5().finalize)(std::ptr::null_mut()), 0);
        assert_eq!(
            (p.v5().init)(
                std::ptr::null_mut(),
                0,
                1,
                1,
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            ),
            0
        );
    }
    assert_eq!(ch, 0);
}

/// How long one `getCollInfo` takes, through the C ABI (a figure for the docs, not an
/// assertion): `cargo test --release -p topo-tune-tuner --test dlopen -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement"]
fn time_per_call() {
    let p = Plugin::load("time");
    let mut csv = String::new();
    for i in 0..32u64 {
        csv.push_str(&format!(
            "allreduce,{},{},ring,simple,-1,-1,-1\n",
            i << 20,
            (i << 20) + 1000
        ));
    }
    with_file(Some(csv.as_bytes()), || {
        let ctx = p.init(1, 2);
        let n = 2_000_000;
        let started = std::time::Instant::now();
        let mut t = table();
        for i in 0..n {
            let mut ch = 0;
            let ptr = t.as_mut_ptr().cast::<f32>().cast::<*mut f32>();
            // SAFETY: as NCCL calls it; the last rule's range, so every rule is looked at.
            unsafe { (p.v5().get_coll_info)(ctx, ALLREDUCE, (31 << 20) + (i % 1000), 1, ptr, 7, 3, 0, &mut ch) };
        }
        let per = started.elapsed().as_nanos() as f64 / n as f64;
        eprintln!("getCollInfo: {per:.1} ns per call, 32 rules, the match in the last");
    });
}
