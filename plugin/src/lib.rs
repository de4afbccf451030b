//! topo-tune's NCCL tuner plugin: at each communicator's `init` it reads the rules `topo-tune
//! tune` measured (`NCCL_TUNER_CONFIG_FILE`, the CSV of NCCL's example plugin, read strictly:
//! `rules`), keeps those for the communicator's shape (nodes, ranks), and in `getCollInfo`
//! marks the first matching rule's algorithm and protocol cheapest in NCCL's cost table —
//! only where NCCL marked that pair usable — and its channel count when the rule has one.
//!
//! What NCCL does with a tuner (NVIDIA/nccl src/enqueue.cc `ncclGetAlgoInfo`, src/plugin/
//! tuner.cc) shapes every choice here:
//! - an error from `getCollInfo` is fatal to the job (`NCCLCHECK`), whatever the header says:
//!   this plugin never returns one; a missing or refused file means no rules, logged once
//!   through NCCL's logger, and NCCL's own choice everywhere;
//! - the cost table is `float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]` passed as `float**`:
//!   read as a flat row-major array, never dereferenced twice; `-1.0` marks pairs NCCL will
//!   not run (`NCCL_ALGO`/`NCCL_PROTO` remove pairs before the tuner sees them): never touched;
//! - `*nChannels` left at 0 keeps NCCL's channel count (NCCL's example plugin writes 1 before
//!   it looks for a rule, so every collective it has no rule for runs on one channel);
//! - `init` runs for every communicator, one-rank ones too; `getCollInfo` on the hot path of
//!   every collective: it allocates nothing, takes no lock and walks only this shape's rules.
//!
//! Exported: `ncclTunerPlugin_v6` (NCCL 2.30.3 and later look for it first; its
//! `getChunkSize` is NULL, which NCCL allows: chunk sizes are what this plugin never sets —
//! wrong results were seen with large chunks, NVIDIA/nccl#2408), `ncclTunerPlugin_v5` (2.28
//! and later) and `ncclTunerPlugin_v4` (2.24–2.27). NCCL 2.32's v7 keeps `init`,
//! `getCollInfo`, `finalize` and `getChunkSize` and changes only the constants struct (double,
//! a fifth compute-capability row); NCCL 2.32 still looks for v6 after v7, so this plugin
//! loads there through v6, and the constants it never touches do not matter.

pub mod rules;

use rules::Rule;
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};

/// `ncclResult_t`'s success.
const SUCCESS: c_int = 0;
/// `NCCL_LOG_WARN`, `NCCL_LOG_INFO`; `NCCL_TUNING` (src/include/nccl_common.h).
const LOG_WARN: c_int = 2;
const LOG_INFO: c_int = 3;
const TUNING: c_ulong = 0x40;
/// `NCCL_ALGO_PROTO_IGNORE`.
const IGNORE: f32 = -1.0;

/// NCCL's logger: `void (*)(ncclDebugLogLevel, unsigned long flags, const char* file, int
/// line, const char* fmt, ...)`. Calling a C variadic function from Rust is stable.
pub type Logger = unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...);

/// `ncclNvlDomainInfo_v5_t` (src/include/plugin/tuner/tuner_v5.h).
#[repr(C)]
pub struct NvlDomainInfoV5 {
    pub n_nvl_domains: c_int,
    pub min_ranks_per_nvl_domain: c_int,
    pub max_ranks_per_nvl_domain: c_int,
}

/// `ncclTunerConstants_v5_t`: NCCL's cost-model constants, which this plugin leaves alone.
#[repr(C)]
pub struct TunerConstantsV5 {
    pub base_latencies: [[f64; 3]; 7],
    pub hw_latencies: [[[f64; 3]; 7]; 3],
    pub ll_max_bws: [[f64; 3]; 4],
    pub per_ch_max_ring_ll128_bws: [[f64; 3]; 4],
    pub per_ch_max_tree_ll128_bws: [[f64; 3]; 4],
    pub per_ch_max_tree_bws: [[f64; 3]; 4],
    pub per_ch_max_nvls_tree_bws: [[f64; 3]; 4],
}

type GetCollInfo =
    unsafe extern "C" fn(*mut c_void, c_int, usize, c_int, *mut *mut f32, c_int, c_int, c_int, *mut c_int) -> c_int;

/// `init` of v5 and v6: `(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, logger,
/// ncclNvlDomainInfo_v5_t*, ncclTunerConstants_v5_t*)`.
pub type InitV5 = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    usize,
    usize,
    Option<Logger>,
    *mut NvlDomainInfoV5,
    *mut TunerConstantsV5,
) -> c_int;

/// `ncclTuner_v5_t`.
#[repr(C)]
pub struct TunerV5 {
    pub name: *const c_char,
    pub init: InitV5,
    pub get_coll_info: GetCollInfo,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// `getChunkSize(ctx, collType, nBytes, algorithm, protocol, nChannels, size_t* chunkSize)`.
pub type GetChunkSize = unsafe extern "C" fn(*mut c_void, c_int, usize, c_int, c_int, c_int, *mut usize) -> c_int;

/// `ncclTuner_v6_t`: v5 and an optional `getChunkSize` (NULL: NCCL's own chunk size).
#[repr(C)]
pub struct TunerV6 {
    pub name: *const c_char,
    pub init: InitV5,
    pub get_coll_info: GetCollInfo,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub get_chunk_size: Option<GetChunkSize>,
}

/// `ncclTuner_v4_t`.
#[repr(C)]
pub struct TunerV4 {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(usize, usize, Option<Logger>, *mut *mut c_void) -> c_int,
    pub get_coll_info: GetCollInfo,
    pub destroy: unsafe extern "C" fn(*mut c_void) -> c_int,
}

// SAFETY: the structs hold a pointer to a static C string and function pointers, all
// immutable for the life of the process.
unsafe impl Sync for TunerV6 {}
unsafe impl Sync for TunerV5 {}
unsafe impl Sync for TunerV4 {}

const NAME: &CStr = c"topo-tune";

#[allow(non_upper_case_globals)]
#[no_mangle]
pub static ncclTunerPlugin_v6: TunerV6 = TunerV6 {
    name: NAME.as_ptr(),
    init: init_v5,
    get_coll_info,
    finalize,
    get_chunk_size: None,
};

#[allow(non_upper_case_globals)]
#[no_mangle]
pub static ncclTunerPlugin_v5: TunerV5 = TunerV5 {
    name: NAME.as_ptr(),
    init: init_v5,
    get_coll_info,
    finalize,
};

#[allow(non_upper_case_globals)]
#[no_mangle]
pub static ncclTunerPlugin_v4: TunerV4 = TunerV4 {
    name: NAME.as_ptr(),
    init: init_v4,
    get_coll_info,
    destroy: finalize,
};

/// One communicator's rules: those of its shape, in file order.
struct Context {
    rules: Vec<Rule>,
}

/// Said once per process: NCCL creates many communicators, and each would say it again.
static TOLD: AtomicBool = AtomicBool::new(false);

fn log(logger: Option<Logger>, level: c_int, message: &str) {
    let Some(logger) = logger else { return };
    let text = CString::new(format!("TUNER/topo-tune: {message}").replace('\0', " ")).unwrap_or_default();
    // SAFETY: NCCL's logger, called with a format of one `%s` and one C string, as it expects.
    unsafe { logger(level, TUNING, c"topo-tune".as_ptr(), 0, c"%s".as_ptr(), text.as_ptr()) };
}

/// `O_NONBLOCK` on Linux (x86-64 and AArch64 alike): opening a FIFO swapped in for the file
/// returns at once instead of blocking NCCL's init until a writer comes.
const O_NONBLOCK: i32 = 0o4000;

/// The file's bytes, if it is a regular file of bounded size outside /proc and /sys; else why
/// not. Opened once, without blocking, and the opened file is what is judged (no check of one
/// file and read of another).
fn read_bounded(path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{path}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{path}: not a regular file"));
    }
    let kernel = ["/proc", "/sys"]
        .iter()
        .any(|d| std::fs::metadata(d).is_ok_and(|m| m.dev() == meta.dev()));
    if kernel {
        return Err(format!("{path}: a /proc or /sys file, not a rules file"));
    }
    if meta.len() > rules::MAX_BYTES {
        return Err(format!("{path}: larger than {} bytes", rules::MAX_BYTES));
    }
    let mut bytes = Vec::new();
    file.take(rules::MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(bytes)
}

/// The rules for a communicator of this shape; every problem logged (once per process) and
/// answered with fewer rules or none, so that NCCL keeps its own choices where no rule is.
fn load(n_nodes: usize, n_ranks: usize, logger: Option<Logger>) -> Vec<Rule> {
    let first = !TOLD.swap(true, Ordering::SeqCst);
    let say = |level: c_int, message: &str| {
        if first {
            log(logger, level, message);
        }
    };
    let Some(path) = std::env::var_os("NCCL_TUNER_CONFIG_FILE") else {
        say(
            LOG_INFO,
            "NCCL_TUNER_CONFIG_FILE is not set: no rules, NCCL's own choices",
        );
        return Vec::new();
    };
    let path = path.to_string_lossy().into_owned();
    let parsed = read_bounded(&path).and_then(|b| rules::parse(&b).map_err(|e| format!("{path}: {e}")));
    match parsed {
        Ok(all) => {
            for r in &all.refused {
                say(LOG_WARN, &format!("{path}: {r}: line refused, the others are kept"));
            }
            let mine: Vec<Rule> = all.rules.iter().copied().filter(|r| r.fits(n_nodes, n_ranks)).collect();
            say(
                LOG_INFO,
                &format!(
                    "{} rule(s) from {path} ({} line(s) refused); {} for {n_nodes} node(s), {n_ranks} rank(s)",
                    all.rules.len(),
                    all.refused.len(),
                    mine.len()
                ),
            );
            mine
        }
        Err(why) => {
            say(
                LOG_WARN,
                &format!("{why}: refused, no rules; NCCL's own choices are kept"),
            );
            Vec::new()
        }
    }
}

/// Make a context: never fails (a context with no rules changes nothing).
///
/// # Safety
/// `ctx` is NCCL's out-pointer for the context.
unsafe fn make(ctx: *mut *mut c_void, n_nodes: usize, n_ranks: usize, logger: Option<Logger>) -> c_int {
    if ctx.is_null() {
        return SUCCESS;
    }
    let rules = std::panic::catch_unwind(|| load(n_nodes, n_ranks, logger)).unwrap_or_default();
    // SAFETY: checked non-null above; NCCL hands this pointer back to getCollInfo/finalize.
    unsafe { *ctx = Box::into_raw(Box::new(Context { rules })).cast() };
    SUCCESS
}

unsafe extern "C" fn init_v5(
    ctx: *mut *mut c_void,
    _comm_id: u64,
    n_ranks: usize,
    n_nodes: usize,
    logger: Option<Logger>,
    _nvl: *mut NvlDomainInfoV5,
    _constants: *mut TunerConstantsV5,
) -> c_int {
    // SAFETY: NCCL's out-pointer.
    unsafe { make(ctx, n_nodes, n_ranks, logger) }
}

unsafe extern "C" fn init_v4(n_ranks: usize, n_nodes: usize, logger: Option<Logger>, ctx: *mut *mut c_void) -> c_int {
    // SAFETY: NCCL's out-pointer.
    unsafe { make(ctx, n_nodes, n_ranks, logger) }
}

/// The first rule for this call whose pair NCCL can run: that pair made cheapest (0.0), and
/// its channel count given when it has one. Always success.
///
/// # Safety
/// NCCL's arguments: the context made by `init`, a cost table of `num_algo × num_proto`
/// floats, the channel count's out-pointer.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn get_coll_info(
    ctx: *mut c_void,
    coll_type: c_int,
    n_bytes: usize,
    num_pipe_ops: c_int,
    cost_table: *mut *mut f32,
    num_algo: c_int,
    num_proto: c_int,
    reg_buff: c_int,
    n_channels: *mut c_int,
) -> c_int {
    if ctx.is_null() || cost_table.is_null() || num_algo <= 0 || num_proto <= 0 {
        return SUCCESS;
    }
    // SAFETY: `ctx` is the Context `make` boxed; NCCL keeps it alive until finalize.
    let c = unsafe { &*(ctx as *const Context) };
    let table = cost_table.cast::<f32>();
    for r in &c.rules {
        if !r.matches(coll_type, n_bytes as u64, num_pipe_ops, reg_buff)
            || r.algorithm >= num_algo
            || r.protocol >= num_proto
        {
            continue;
        }
        let at = (r.algorithm * num_proto + r.protocol) as usize;
        // SAFETY: `at` < num_algo × num_proto, the table's size (NCCL's float[7][3]).
        let cell = unsafe { table.add(at) };
        // SAFETY: as above.
        if unsafe { *cell } == IGNORE {
            continue;
        }
        // SAFETY: as above; `n_channels` is NCCL's out-pointer, checked before the write.
        unsafe {
            *cell = 0.0;
            if r.channels > 0 && !n_channels.is_null() {
                *n_channels = r.channels;
            }
        }
        return SUCCESS;
    }
    SUCCESS
}

unsafe extern "C" fn finalize(ctx: *mut c_void) -> c_int {
    if !ctx.is_null() {
        // SAFETY: the Context `make` boxed, freed once (NCCL calls finalize once per init).
        drop(unsafe { Box::from_raw(ctx.cast::<Context>()) });
    }
    SUCCESS
}
