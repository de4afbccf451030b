//! The event reader: a PyTorch profiler (Kineto) Chrome-trace JSON document read as a stream
//! of events, keeping only what the analysis needs — GPU activity (kernels, copies, sets) as
//! intervals with their correlation, CUDA runtime launches, the collective CPU ops
//! (`record_param_comms`, `c10d::*`, `nccl:*`) with their arguments, and the `ProfilerStep#N`
//! spans. Nothing holds the document whole: a 1 GB trace costs its kept events, not its text.
//! Pure: any `Read` in, events out or an error that names the event.

use super::scan::{ScanError, Scanner};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::BufRead;

/// Most events one trace may hold (a 1 GB trace holds about five million).
pub(crate) const MAX_EVENTS: u64 = 20_000_000;

/// A GPU activity's class, by HTA's rules on its name (`hta/common/types.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GpuClass {
    /// `^nccl`, `ncclKernel`, or (set later) launched by a collective's CPU op.
    Comm,
    /// `Memcpy`, `Memset`, `dma`.
    Memory,
    /// Every other kernel that is not a sync, a wait or a launch.
    Compute,
    Other,
}

/// One GPU activity: an interval in nanoseconds (32 bytes: a trace of ten million kernels
/// keeps 320 MB of them). Its stream is not kept: classes are merged across streams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GpuEvent {
    pub(crate) start: i64,
    pub(crate) end: i64,
    /// `u64::MAX` when the event has none.
    correlation: u64,
    /// Index into `RawTrace::kernel_args` when the kernel carries a collective's arguments,
    /// else `u32::MAX`.
    args: u32,
    pub(crate) class: GpuClass,
}

impl GpuEvent {
    pub(crate) fn correlation(&self) -> Option<u64> {
        (self.correlation != u64::MAX).then_some(self.correlation)
    }
    pub(crate) fn args(&self) -> Option<u32> {
        (self.args != u32::MAX).then_some(self.args)
    }
}

/// A CUDA runtime or driver call on a CPU thread (what launches GPU work).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Launch {
    pub(crate) tid: u64,
    pub(crate) ts: i64,
    pub(crate) correlation: u64,
}

/// Which of PyTorch's collective markers an op is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum OpKind {
    /// `record_param_comms`: the op that carries the collective's parameters.
    RecordParamComms,
    /// `c10d::allreduce_` and the like: the dispatcher op around it.
    C10d,
    /// `nccl:all_reduce`: ProcessGroupNCCL's profiling title.
    NcclTitle,
}

/// What a collective's op or kernel says of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CommArgs {
    pub(crate) collective: Option<String>,
    pub(crate) in_nelems: Option<u64>,
    pub(crate) out_nelems: Option<u64>,
    pub(crate) dtype: Option<String>,
    pub(crate) group_size: Option<u64>,
    pub(crate) pg_name: Option<String>,
    pub(crate) pg_ranks: Option<String>,
    /// Per input of the op: elements × element size, `None` where unknown (a tensor list
    /// without shapes, a scalar).
    pub(crate) input_bytes: Vec<Option<u64>>,
}

/// A collective marker on a CPU thread.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommOp {
    pub(crate) kind: OpKind,
    pub(crate) name: String,
    pub(crate) tid: u64,
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) args: CommArgs,
}

/// A `ProfilerStep#N` span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub(crate) number: u64,
    pub(crate) start: i64,
    pub(crate) end: i64,
}

/// One process group as `distributedInfo.pg_config` lists it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub(crate) struct PgConfig {
    #[serde(default)]
    pub(crate) pg_name: String,
    #[serde(default)]
    pub(crate) pg_size: Option<u64>,
    #[serde(default)]
    pub(crate) ranks: Vec<i64>,
}

/// `distributedInfo`, as far as it is used.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub(crate) struct DistributedInfo {
    #[serde(default)]
    pub(crate) rank: Option<i64>,
    #[serde(default)]
    pub(crate) world_size: Option<i64>,
    #[serde(default)]
    pub(crate) pg_config: Vec<PgConfig>,
    #[serde(default)]
    pub(crate) nccl_version: Option<String>,
}

/// Events not used, counted by why.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Skipped {
    /// `ph: "X"` without `ts` or `dur`.
    pub(crate) no_time: u64,
    /// A negative, non-finite or out-of-range `ts` or `dur`.
    pub(crate) bad_time: u64,
}

impl Skipped {
    pub(crate) fn total(&self) -> u64 {
        self.no_time + self.bad_time
    }
}

/// What a trace holds, as far as the analysis needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RawTrace {
    pub(crate) dist: Option<DistributedInfo>,
    pub(crate) events: u64,
    pub(crate) gpu: Vec<GpuEvent>,
    pub(crate) kernel_args: Vec<CommArgs>,
    pub(crate) launches: Vec<Launch>,
    pub(crate) ops: Vec<CommOp>,
    pub(crate) steps: Vec<Step>,
    /// CPU spans that wait for a collective (`## Request wait() ##`, torchrec's
    /// `All2All_Pooled_Wait`): a `record_param_comms` that names nothing inside one is the
    /// wait's, not a collective.
    pub(crate) waits: Vec<Span>,
    pub(crate) skipped: Skipped,
}

/// A CPU span on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) tid: u64,
    pub(crate) start: i64,
    pub(crate) end: i64,
}

/// Why a trace could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("not a PyTorch profiler trace: {0}")]
    NotKineto(String),
    #[error("event {index}: {message}")]
    Event { index: u64, message: String },
    #[error("more than {0} events: refused (profile fewer steps)")]
    TooMany(u64),
    #[error("{0}")]
    Json(String),
}

/// Most bytes one event (or `distributedInfo`) may take.
const MAX_VALUE_BYTES: u64 = 64 << 20;

/// Read a whole trace from `input`: the top-level object scanned key by key, each event of
/// `traceEvents` cut out and parsed on its own, every other key skipped unread.
pub(crate) fn read(input: impl BufRead) -> Result<RawTrace, ReadError> {
    read_limited(input, MAX_EVENTS)
}

/// [`read`] with a stated event limit.
pub(crate) fn read_limited(input: impl BufRead, max_events: u64) -> Result<RawTrace, ReadError> {
    let mut trace = RawTrace::default();
    let mut state = State {
        trace: &mut trace,
        name: String::new(),
    };
    let mut s = Scanner::new(input);
    let json = |e: ScanError| ReadError::Json(e.to_string());
    match s.peek().map_err(json)? {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(ReadError::NotKineto(
                "a bare JSON array (Chrome's array form); the profiler writes an object with `traceEvents`".into(),
            ))
        }
        Some(_) => return Err(ReadError::NotKineto("not a JSON object".into())),
        None => return Err(ReadError::Json(ScanError::Eof(0).to_string())),
    }
    s.eat(b'{', "an object").map_err(json)?;
    let mut saw_events = false;
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    if s.peek().map_err(json)? == Some(b'}') {
        s.eat(b'}', "the end").map_err(json)?;
    } else {
        loop {
            buf.clear();
            s.value(Some(&mut buf), 4096).map_err(json)?;
            let key: String = serde_json::from_slice(&buf)
                .map_err(|e| ReadError::Json(format!("a key that is not a string: {e}")))?;
            s.eat(b':', "a colon").map_err(json)?;
            match key.as_str() {
                "traceEvents" | "distributedInfo" if !seen.insert(key.clone()) => {
                    return Err(ReadError::NotKineto(format!("`{key}` twice: one trace, one of each")))
                }
                "traceEvents" => {
                    saw_events = true;
                    events(&mut s, &mut state, max_events)?;
                }
                "distributedInfo" => {
                    buf.clear();
                    s.value(Some(&mut buf), MAX_VALUE_BYTES).map_err(json)?;
                    let d = serde_json::from_slice::<DistributedInfo>(&buf)
                        .map_err(|e| ReadError::NotKineto(format!("`distributedInfo` is malformed: {e}")))?;
                    state.trace.dist = Some(d);
                }
                _ => s.value(None, u64::MAX).map_err(json)?,
            }
            if s.one_of(b",}", "a comma or the end of the object").map_err(json)? == b'}' {
                break;
            }
        }
    }
    if let Some(b) = s.peek().map_err(json)? {
        return Err(ReadError::Json(format!(
            "not valid JSON at byte {}: {:?} after the trace object",
            s.offset, b as char
        )));
    }
    if !saw_events {
        return Err(ReadError::NotKineto("no `traceEvents` array".into()));
    }
    Ok(trace)
}

/// `traceEvents`: each element cut out and parsed from its own bytes.
fn events<R: BufRead>(s: &mut Scanner<R>, state: &mut State, max_events: u64) -> Result<(), ReadError> {
    let json = |e: ScanError| ReadError::Json(e.to_string());
    if s.peek().map_err(json)? != Some(b'[') {
        return Err(ReadError::NotKineto("`traceEvents` is not an array".into()));
    }
    s.eat(b'[', "an array").map_err(json)?;
    if s.peek().map_err(json)? == Some(b']') {
        return s.eat(b']', "the end").map_err(json);
    }
    let mut buf = Vec::new();
    loop {
        let index = state.trace.events;
        if index >= max_events {
            return Err(ReadError::TooMany(max_events));
        }
        buf.clear();
        s.value(Some(&mut buf), MAX_VALUE_BYTES).map_err(|e| ReadError::Event {
            index,
            message: e.to_string(),
        })?;
        let mut de = serde_json::Deserializer::from_slice(&buf);
        let event = EventSeed(state)
            .deserialize(&mut de)
            .and_then(|e| de.end().map(|()| e))
            .map_err(|e| ReadError::Event {
                index,
                message: e.to_string(),
            })?;
        state.trace.events += 1;
        keep(state, event);
        if s.one_of(b",]", "a comma or the end of `traceEvents`").map_err(json)? == b']' {
            return Ok(());
        }
    }
}

/// The reader's working state: the trace being filled and a reused name buffer.
struct State<'a> {
    trace: &'a mut RawTrace,
    name: String,
}

/// A key matched without allocating.
macro_rules! keys {
    ($name:ident { $($text:literal => $variant:ident),* $(,)? }) => {
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum $name { $($variant,)* Other }
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a key")
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$name, E> {
                        Ok(match s { $($text => $name::$variant,)* _ => $name::Other })
                    }
                }
                d.deserialize_identifier(V)
            }
        }
    };
}

keys!(EventKey { "ph" => Ph, "cat" => Cat, "name" => Name, "tid" => Tid, "ts" => Ts, "dur" => Dur, "args" => Args });

impl EventKey {
    /// Its place among the keys an event may give once (`None`: a key not read).
    fn slot(self) -> Option<usize> {
        [
            EventKey::Ph,
            EventKey::Cat,
            EventKey::Name,
            EventKey::Tid,
            EventKey::Ts,
            EventKey::Dur,
            EventKey::Args,
        ]
        .iter()
        .position(|k| *k == self)
    }

    fn text(self) -> &'static str {
        ["ph", "cat", "name", "tid", "ts", "dur", "args"][self.slot().unwrap_or(0)]
    }
}
keys!(ArgKey {
    "correlation" => Correlation,
    "Collective name" => Collective,
    "In msg nelems" => InNelems,
    "Out msg nelems" => OutNelems,
    "dtype" => Dtype,
    "Group size" => GroupSize,
    "Process Group Name" => PgName,
    "Process Group Ranks" => PgRanks,
    "Input Dims" => InputDims,
    "Input type" => InputType,
});

/// The category of an event, as far as it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cat {
    Gpu,
    Runtime,
    CpuOp,
    Annotation,
    Other,
}

/// One event's fields before it is judged.
#[derive(Default)]
struct Event {
    complete: bool,
    cat: Option<Cat>,
    tid: u64,
    /// `ts` and `dur` in nanoseconds, read from the number's text (`Some(None)`: given, but
    /// not a number that is a time).
    ts: Option<Option<i64>>,
    dur: Option<Option<i64>>,
    correlation: Option<u64>,
    comm: CommArgs,
    has_name: bool,
}

struct EventSeed<'s, 'a>(&'s mut State<'a>);

impl<'de> DeserializeSeed<'de> for EventSeed<'_, '_> {
    type Value = Event;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Event, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_, '_> {
    type Value = Event;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        let mut e = Event::default();
        self.0.name.clear();
        let mut seen = [false; 7];
        while let Some(key) = map.next_key::<EventKey>()? {
            // JSON leaves a repeated key to the reader; Chrome's reader and Python's json keep
            // the last, a streaming one the first: such an event means what its writer did not
            // say. Refused, named.
            if let Some(slot) = key.slot() {
                if std::mem::replace(&mut seen[slot], true) {
                    return Err(de::Error::custom(format!(
                        "the key `{}` twice in one event",
                        key.text()
                    )));
                }
            }
            match key {
                EventKey::Ph => e.complete = map.next_value_seed(Text(&mut self.0.name, TextUse::Ph))?,
                EventKey::Cat => e.cat = Some(map.next_value_seed(CatSeed)?),
                EventKey::Name => {
                    map.next_value_seed(Text(&mut self.0.name, TextUse::Name))?;
                    e.has_name = true;
                }
                EventKey::Tid => e.tid = map.next_value_seed(IdSeed)?,
                EventKey::Ts => e.ts = Some(nanos(map.next_value::<&serde_json::value::RawValue>()?.get())),
                EventKey::Dur => e.dur = Some(nanos(map.next_value::<&serde_json::value::RawValue>()?.get())),
                EventKey::Args => {
                    let wanted =
                        !e.has_name || is_comm_op(&self.0.name) || matches!(e.cat, Some(Cat::Gpu | Cat::Runtime));
                    if wanted {
                        map.next_value_seed(ArgsSeed(&mut e))?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                EventKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(e)
    }
}

/// How a text field is used: `ph` (only "X" matters) or the name (kept in the buffer).
#[derive(Clone, Copy)]
enum TextUse {
    Ph,
    Name,
}

/// A string copied into a reused buffer (`Name`), or compared (`Ph`: true for "X").
struct Text<'b>(&'b mut String, TextUse);

impl<'de> DeserializeSeed<'de> for Text<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Text<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
        match self.1 {
            TextUse::Ph => Ok(s == "X"),
            TextUse::Name => {
                self.0.clear();
                // A name longer than any kernel's demangled signature is cut, not kept whole.
                let cut = s.char_indices().nth(4096).map_or(s.len(), |(i, _)| i);
                self.0.push_str(&s[..cut]);
                Ok(true)
            }
        }
    }
}

struct CatSeed;

impl<'de> DeserializeSeed<'de> for CatSeed {
    type Value = Cat;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cat, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for CatSeed {
    type Value = Cat;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a category string")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Cat, E> {
        Ok(match s {
            "kernel" | "gpu_memcpy" | "gpu_memset" => Cat::Gpu,
            "cuda_runtime" | "cuda_driver" => Cat::Runtime,
            "cpu_op" => Cat::CpuOp,
            "user_annotation" => Cat::Annotation,
            _ => Cat::Other,
        })
    }
}

/// A thread id: a number, or a string (hashed: only equality matters). A seed, not a
/// `serde_json::Value`: every event has one, and going through `Value` cost 10 % of the read.
struct IdSeed;

impl<'de> DeserializeSeed<'de> for IdSeed {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdSeed {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a thread id")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        Ok(v as u64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        Ok(v.to_bits())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
        Ok(s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }) | 1 << 63)
    }
}

/// A number (JSON integer or float) as f64; anything else is NaN, judged later. A seed for
/// the same reason as [`IdSeed`].
struct NumberSeed;

impl<'de> DeserializeSeed<'de> for NumberSeed {
    type Value = f64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NumberSeed {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<f64, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(f64::NAN)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<f64, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(f64::NAN)
    }
}

/// An event's `args`, the keys that matter.
struct ArgsSeed<'e>(&'e mut Event);

impl<'de> DeserializeSeed<'de> for ArgsSeed<'_> {
    type Value = ();
    /// Kineto writes `args` as an object; anything else makes the event, and the trace, bad.
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ArgsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an args object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let e = self.0;
        let mut dims: Vec<Option<u64>> = Vec::new();
        let mut types: Vec<Option<u64>> = Vec::new();
        while let Some(key) = map.next_key::<ArgKey>()? {
            let c = &mut e.comm;
            match key {
                ArgKey::Correlation => e.correlation = whole(map.next_value_seed(NumberSeed)?),
                ArgKey::Collective => c.collective = short(map.next_value::<serde_json::Value>()?),
                ArgKey::InNelems => c.in_nelems = whole(map.next_value_seed(NumberSeed)?),
                ArgKey::OutNelems => c.out_nelems = whole(map.next_value_seed(NumberSeed)?),
                ArgKey::Dtype => c.dtype = short(map.next_value::<serde_json::Value>()?),
                ArgKey::GroupSize => c.group_size = whole(map.next_value_seed(NumberSeed)?),
                ArgKey::PgName => c.pg_name = short(map.next_value::<serde_json::Value>()?),
                ArgKey::PgRanks => c.pg_ranks = short(map.next_value::<serde_json::Value>()?),
                ArgKey::InputDims => dims = per_input(&map.next_value()?, |v| elements(v, 0)),
                ArgKey::InputType => types = per_input(&map.next_value()?, |v| v.as_str().and_then(cpp_type_size)),
                ArgKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        e.comm.input_bytes = dims
            .iter()
            .enumerate()
            .map(|(i, n)| n.as_ref()?.checked_mul(types.get(i).copied().flatten()?))
            .collect();
        Ok(())
    }
}

/// A non-negative whole number, else nothing.
fn whole(v: f64) -> Option<u64> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9.0e18).then_some(v as u64)
}

/// A string argument of sensible length (names, dtypes, rank lists), else nothing.
fn short(v: serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) if s.len() <= 4096 => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Elements of one input's shape (`Input Dims`): a tensor `[d0, d1, …]` the product, a
/// tensor list `[[…], […]]` the sum of its tensors', an empty list unknown.
fn elements(v: &serde_json::Value, depth: u32) -> Option<u64> {
    let items = v.as_array()?;
    if items.is_empty() || depth > 2 {
        return None;
    }
    if items.iter().all(serde_json::Value::is_array) {
        return items
            .iter()
            .map(|t| elements(t, depth + 1))
            .try_fold(0u64, |sum, n| sum.checked_add(n?));
    }
    items
        .iter()
        .map(|d| d.as_u64())
        .try_fold(1u64, |p, d| p.checked_mul(d?))
}

/// `Input Dims` or `Input type`: one figure per input (at most 64), from an array.
fn per_input(v: &serde_json::Value, figure: impl Fn(&serde_json::Value) -> Option<u64>) -> Vec<Option<u64>> {
    v.as_array()
        .map_or_else(Vec::new, |items| items.iter().take(64).map(figure).collect())
}

/// Bytes per element of a C++ scalar type as the profiler names it (`Input type`).
pub(crate) fn cpp_type_size(t: &str) -> Option<u64> {
    Some(match t {
        "double" | "long" | "long int" | "int64_t" | "c10::complex<float>" | "unsigned long" => 8,
        "float" | "int" | "unsigned int" => 4,
        "c10::Half" | "c10::BFloat16" | "short" | "short int" => 2,
        "unsigned char" | "signed char" | "char" | "bool" => 1,
        t if t.starts_with("c10::Float8") => 1,
        _ => return None,
    })
}

/// Bytes per element of a `dtype` argument (ScalarType names: `Float`, `BFloat16`).
pub(crate) fn dtype_size(t: &str) -> Option<u64> {
    Some(match t {
        "Double" | "Long" | "ComplexFloat" | "UInt64" => 8,
        "Float" | "Int" | "UInt32" => 4,
        "Half" | "BFloat16" | "Short" | "UInt16" => 2,
        "Byte" | "Char" | "Bool" | "UInt8" | "Int8" => 1,
        t if t.starts_with("Float8") => 1,
        _ => return None,
    })
}

/// Whether a CPU op or annotation marks a collective.
fn op_kind(name: &str) -> Option<OpKind> {
    if name == "record_param_comms" {
        Some(OpKind::RecordParamComms)
    } else if (name.starts_with("c10d::") || name.starts_with("symm_mem::")) && !name.contains("wait") {
        Some(OpKind::C10d)
    } else if name.starts_with("nccl:") {
        Some(OpKind::NcclTitle)
    } else {
        None
    }
}

/// A CPU span that waits for a collective: `wait` in its name (a Python `work.wait()`
/// annotation, an awaitable's `wait()`, `c10d::wait`), and not a collective op itself.
fn is_wait(name: &str) -> bool {
    name.len() < 512
        && name.as_bytes().windows(4).any(|w| w.eq_ignore_ascii_case(b"wait"))
        && name != "record_param_comms"
        && !name.starts_with("nccl:")
}

fn is_comm_op(name: &str) -> bool {
    op_kind(name).is_some()
}

/// Collectives that run as kernels of their own, without NCCL: PyTorch's symmetric memory
/// (torch >= 2.5: `multimem_all_reduce_kernel`, `multimem_one_shot_all_reduce_kernel`,
/// `one_shot_all_reduce_kernel`, `two_shot_all_reduce_kernel_inplace`,
/// `multimem_all_gather_kernel`) and vLLM's custom all-reduce (`cross_device_reduce_1stage`,
/// `_2stage`). HTA 0.5 classes them as computation; topo-tune counts them as communication
/// (docs/diagnose.md). Judged by the kernel's own name, wherever it lives: the real one is
/// `void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(…)`, and in a
/// CUDA-graph replay no CPU op surrounds its launch.
fn is_symm_mem_kernel(name: &str) -> bool {
    let own = callable(name);
    own.starts_with("multimem_")
        || own.starts_with("one_shot_all_reduce")
        || own.starts_with("two_shot_all_reduce")
        || own.starts_with("cross_device_reduce_")
}

/// A demangled kernel's own name: its return type, namespaces, template and parameters cut
/// (`void (anonymous namespace)::foo<int>(int*)` → `foo`).
fn callable(name: &str) -> &str {
    let s = name.trim_start();
    let s = s.strip_prefix("void ").unwrap_or(s);
    let mut end = s.len();
    let mut i = 0;
    while let Some(off) = s[i..].find(['<', '(']) {
        let at = i + off;
        let rest = &s[at..];
        let skip = ["(anonymous namespace)", "<unnamed>", "{anonymous}"]
            .iter()
            .find(|p| rest.starts_with(**p))
            .map(|p| p.len());
        match skip {
            Some(n) => i = at + n,
            None => {
                end = at;
                break;
            }
        }
    }
    s[..end].rsplit("::").next().unwrap_or("")
}

/// HTA's kernel classes (hta/common/types.py, in its order: communication, then memory, then
/// computation as the inverse of its non-compute pattern).
pub(crate) fn gpu_class(name: &str) -> GpuClass {
    let starts = |p: &[&str]| p.iter().any(|x| name.starts_with(x));
    if starts(&["nccl", "hip", "hccl"]) || name.contains("ncclKernel") {
        return GpuClass::Comm;
    }
    if starts(&["Memcpy", "Memset", "dma"]) {
        return GpuClass::Memory;
    }
    let not_compute = ["Memcpy", "Memset", "dma", "Sync"].iter().any(|x| name.contains(x))
        || starts(&[
            "Stream Wait Event",
            "runFunction",
            "job_exe",
            "packet",
            "pe_exe",
            "cpum_exe_subgraph",
            "collective_subgraph_execution",
        ])
        || name.find("cuda").is_some_and(|i| name[i..].contains("LaunchKernel"));
    if not_compute {
        GpuClass::Other
    } else if is_symm_mem_kernel(name) {
        GpuClass::Comm
    } else {
        GpuClass::Compute
    }
}

/// Microseconds as the trace writes them (`1694128201435031.123`, `12`, `1.5e3`) to whole
/// nanoseconds, exactly: read from the number's text, never through an f64, whose 53 bits
/// hold an absolute-µs timestamp only to 256 ns once multiplied (a child pushed past its
/// parent's end became a phantom collective). Rounded half away from zero at the nanosecond;
/// `None` for what is not a JSON number or is beyond ±9·10¹⁸ ns.
pub(crate) fn nanos(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let (negative, b) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let (int, rest) = b.split_at(int_len);
    let (frac, rest) = match rest.split_first() {
        Some((b'.', r)) => {
            let n = r.iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return None;
            }
            r.split_at(n)
        }
        _ => (&[][..], rest),
    };
    let exp: i64 = match rest.split_first() {
        None => 0,
        Some((b'e' | b'E', r)) => {
            let (sign, digits) = match r.split_first() {
                Some((b'-', d)) => (-1, d),
                Some((b'+', d)) => (1, d),
                _ => (1, r),
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // Beyond 10^±99 a time is 0 or out of range either way.
            let d = std::str::from_utf8(digits).ok()?.parse::<i64>().unwrap_or(99).min(99);
            sign * d
        }
        Some(_) => return None,
    };
    if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
        return None;
    }
    // The digits with the decimal point `point` places in, moved three places right (µs → ns).
    let digits = || int.iter().chain(frac.iter());
    let point = int.len() as i64 + exp + 3;
    let mut whole: i64 = 0;
    for (i, d) in digits().enumerate() {
        if (i as i64) >= point {
            break;
        }
        whole = whole.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    let shown = int.len() + frac.len();
    for _ in shown as i64..point.max(0) {
        whole = whole.checked_mul(10)?;
    }
    // Half away from zero: the first dropped digit decides (any later ones cannot); with the
    // point before the first digit, the first dropped one is a 0.
    let first_dropped = usize::try_from(point).ok().and_then(|p| digits().nth(p));
    if first_dropped.is_some_and(|d| *d >= b'5') {
        whole = whole.checked_add(1)?;
    }
    (whole < 9_000_000_000_000_000_000).then_some(if negative { -whole } else { whole })
}

/// `ProfilerStep#12` → 12.
fn step_number(name: &str) -> Option<u64> {
    name.strip_prefix("ProfilerStep#")?.parse().ok()
}

/// Keep what the analysis needs of one event; what cannot be used is counted.
fn keep(state: &mut State, e: Event) {
    if !e.complete {
        return;
    }
    let (Some(ts), Some(dur)) = (e.ts, e.dur) else {
        state.trace.skipped.no_time += 1;
        return;
    };
    let (Some(start), Some(len)) = (ts, dur) else {
        state.trace.skipped.bad_time += 1;
        return;
    };
    if len < 0 || start.checked_add(len).is_none() {
        state.trace.skipped.bad_time += 1;
        return;
    }
    let end = start + len;
    let t = &mut *state.trace;
    let name = state.name.as_str();
    match e.cat {
        Some(Cat::Gpu) => {
            let class = gpu_class(name);
            let carries = e.comm.collective.is_some() || e.comm.in_nelems.is_some();
            let args = match u32::try_from(t.kernel_args.len()) {
                Ok(i) if carries && i < u32::MAX => {
                    t.kernel_args.push(e.comm);
                    i
                }
                _ => u32::MAX,
            };
            t.gpu.push(GpuEvent {
                start,
                end,
                correlation: e.correlation.filter(|c| *c != u64::MAX).unwrap_or(u64::MAX),
                args,
                class,
            });
        }
        Some(Cat::Runtime) => {
            if let Some(correlation) = e.correlation {
                t.launches.push(Launch {
                    tid: e.tid,
                    ts: start,
                    correlation,
                });
            }
        }
        Some(Cat::CpuOp) | Some(Cat::Annotation) => {
            if let Some(number) = step_number(name) {
                t.steps.push(Step { number, start, end });
            } else if is_wait(name) {
                t.waits.push(Span { tid: e.tid, start, end });
            } else if let Some(kind) = op_kind(name) {
                t.ops.push(CommOp {
                    kind,
                    name: name.to_string(),
                    tid: e.tid,
                    start,
                    end,
                    args: e.comm,
                });
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(events: &str) -> Result<RawTrace, ReadError> {
        read(format!(r#"{{"schemaVersion":1,"traceEvents":[{events}]}}"#).as_bytes())
    }

    #[test]
    fn classes_follow_hta() {
        assert_eq!(
            gpu_class("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            GpuClass::Comm
        );
        assert_eq!(
            gpu_class("void at::native::vectorized_elementwise_kernel<4>"),
            GpuClass::Compute
        );
        assert_eq!(gpu_class("Memcpy DtoD (Device -> Device)"), GpuClass::Memory);
        assert_eq!(gpu_class("cudaStreamSynchronize"), GpuClass::Other);
        // Symmetric-memory and vLLM custom all-reduces: communication (HTA 0.5 says
        // computation), by the kernel's own name in any namespace.
        for k in [
            "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16u>(c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)",
            "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16>",
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
            "void <unnamed>::multimem_all_reduce_kernel<c10::BFloat16, (int)16>(c10::BFloat16*)",
            "void c10d::symmetric_memory::(anonymous namespace)::two_shot_all_reduce_kernel_inplace<float, 16, 8>(float*)",
            "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
            "multimem_all_gather_kernel",
        ] {
            assert_eq!(gpu_class(k), GpuClass::Comm, "{k}");
        }
        // A kernel that only mentions one in its template arguments is not one.
        assert_eq!(
            gpu_class("void at::native::elementwise_kernel<128, 4, multimem_all_reduce_kernel>(int)"),
            GpuClass::Compute
        );
        assert_eq!(op_kind("symm_mem::multimem_all_reduce_"), Some(OpKind::C10d));
        assert_eq!(gpu_class("void all_reduce_kernel_like_gemm"), GpuClass::Compute);
    }

    #[test]
    fn events_are_kept_by_kind_and_bad_times_counted() {
        let t = trace(
            r#"{"ph":"X","cat":"kernel","name":"sm90_gemm","pid":0,"tid":7,"ts":10.5,"dur":2,"args":{"stream":7,"correlation":3}},
               {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","tid":11,"ts":9,"dur":1,"args":{"correlation":3}},
               {"ph":"X","cat":"cpu_op","name":"record_param_comms","tid":11,"ts":8,"dur":3,"args":{"Collective name":"allreduce","In msg nelems":1024,"dtype":"BFloat16","Input Dims":[[1024]],"Input type":["c10::BFloat16"]}},
               {"ph":"X","cat":"user_annotation","name":"ProfilerStep#4","tid":11,"ts":0,"dur":100},
               {"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-5},
               {"ph":"X","cat":"kernel","name":"k","ts":1},
               {"ph":"i","name":"instant","ts":3},
               {"ph":"X","cat":"kernel","name":"k","ts":"soon","dur":1}"#,
        )
        .unwrap();
        assert_eq!(t.events, 8);
        assert_eq!(t.gpu.len(), 1);
        assert_eq!(
            (t.gpu[0].start, t.gpu[0].end, t.gpu[0].correlation()),
            (10_500, 12_500, Some(3))
        );
        assert_eq!(
            t.launches,
            vec![Launch {
                tid: 11,
                ts: 9000,
                correlation: 3
            }]
        );
        assert_eq!(t.ops[0].args.input_bytes, vec![Some(2048)]);
        assert_eq!(t.ops[0].args.in_nelems, Some(1024));
        assert_eq!(
            t.steps,
            vec![Step {
                number: 4,
                start: 0,
                end: 100_000
            }]
        );
        assert_eq!(
            t.skipped,
            Skipped {
                no_time: 1,
                bad_time: 2
            }
        );
    }

    /// Times are read from the number's text: an absolute-µs timestamp keeps its nanoseconds
    /// (through an f64 they fell on a 256 ns grid).
    #[test]
    fn times_are_exact_nanoseconds_from_the_text() {
        for (text, want) in [
            ("1694128201435031.123", Some(1_694_128_201_435_031_123)),
            ("1694128201435031.1235", Some(1_694_128_201_435_031_124)),
            ("1694128201435031.12349999", Some(1_694_128_201_435_031_123)),
            ("-2.5005", Some(-2501)),
            ("12", Some(12_000)),
            ("0", Some(0)),
            ("0.0004", Some(0)),
            ("0.0005", Some(1)),
            ("1.5e3", Some(1_500_000)),
            ("15E-4", Some(2)),
            ("1e-9", Some(0)),
            ("5e-4", Some(1)),
            ("8999999999999999.999", Some(8_999_999_999_999_999_999)),
            ("9000000000000000", None),
            ("1e99", None),
            ("\"soon\"", None),
            ("null", None),
            ("01", None),
            ("1.", None),
            ("1e", None),
        ] {
            assert_eq!(nanos(text), want, "{text}");
        }
        // Against f64 where f64 is exact: every whole ns below 2^40 µs.
        for us in [0.001, 1.0, 10.5, 123456.789, 1_000_000.25] {
            assert_eq!(nanos(&format!("{us}")), Some((us * 1000.0_f64).round() as i64), "{us}");
        }
    }

    proptest::proptest! {
        /// Any whole µs and 0–6 fraction digits, written as a trace writes them, is read to
        /// the nanosecond exactly (integer arithmetic on the digits as written).
        #[test]
        fn written_times_read_back_exactly(us in 0u64..9_000_000_000_000_000, frac in 0u32..1_000_000, digits in 0usize..=6) {
            let shown = format!("{frac:06}");
            let text = if digits == 0 { us.to_string() } else { format!("{us}.{}", &shown[..digits]) };
            let kept: u64 = shown[..digits.min(3)].parse::<u64>().unwrap_or(0) * 10u64.pow(3 - digits.min(3) as u32);
            let up = digits > 3 && shown.as_bytes()[3] >= b'5';
            let want = (u128::from(us) * 1000 + u128::from(kept) + u128::from(up)) as i64;
            proptest::prop_assert_eq!(nanos(&text), Some(want));
            proptest::prop_assert_eq!(nanos(&format!("-{text}")), Some(-want));
        }
    }

    #[test]
    fn a_key_twice_in_one_event_is_refused() {
        let e = trace(r#"{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"ts":900}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the key `ts` twice in one event"), "{e}");
        // Keys not read may repeat (they are not used).
        assert!(trace(r#"{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"pid":0,"pid":1}"#).is_ok());
    }

    #[test]
    fn the_event_limit_is_an_error_not_a_wrong_figure() {
        let doc = r#"{"traceEvents":[{"ph":"i"},{"ph":"i"},{"ph":"i"}]}"#;
        assert_eq!(read_limited(doc.as_bytes(), 3).unwrap().events, 3);
        assert_eq!(read_limited(doc.as_bytes(), 2).unwrap_err(), ReadError::TooMany(2));
    }

    #[test]
    fn dims_of_tensors_lists_and_scalars() {
        let v = |s: &str| elements(&serde_json::from_str(s).unwrap(), 0);
        assert_eq!(v("[262144, 1600]"), Some(419_430_400));
        assert_eq!(v("[[4, 4], [2]]"), Some(18));
        assert_eq!(v("[]"), None);
        assert_eq!(v("[[], []]"), None);
        assert_eq!(v("[18446744073709551615, 2]"), None, "overflow is unknown, not wrapped");
    }

    #[test]
    fn what_is_not_a_kineto_trace_says_so() {
        for (doc, want) in [
            ("[]", "bare JSON array"),
            ("{}", "no `traceEvents`"),
            ("42", "not a JSON object"),
            (r#"{"traceEvents":[{"ph":"X"}"#, "ends early"),
            (r#"{"traceEvents":{}}"#, "`traceEvents` is not an array"),
            (r#"{"traceEvents":[{"ph":"X"},]}"#, "event 1: not valid JSON at byte 27"),
            (
                r#"{"traceEvents":[7]}"#,
                "event 0: invalid type: integer `7`, expected an event object",
            ),
            (r#"{"traceEvents":[]} x"#, "after the trace object"),
            (r#"{"traceEvents":[], "traceEvents":[]}"#, "`traceEvents` twice"),
            (
                r#"{"distributedInfo":{"rank":"zero"},"traceEvents":[]}"#,
                "`distributedInfo` is malformed",
            ),
        ] {
            let e = read(doc.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{doc}: {e}");
        }
    }
}
