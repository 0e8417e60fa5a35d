//! NCCL Flight Recorder dumps for tests, in the schema PyTorch writes
//! (`FlightRecorderDetail.hpp`): the pickle as its own pickler lays it out
//! (strings and shared stack frames written once, `process_group` a tuple, `pg_config` ranks as the string `"[0, 1]"`,
//! `pg_status` numbers, absent times `None`, Python stacks in `frames`), and
//! the JSON as its nlohmann writer does (keys sorted, `pg_status` values as
//! strings, absent times 0, no frames, `entries` left out when empty).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::jit_pickle::{self, P};
use crate::model::flight::CallState;

/// A run's calls, rank by rank, as they will be dumped.
#[derive(Debug, Clone)]
pub struct FrRun {
    pub version: String,
    groups: Vec<(String, String, Vec<u32>)>,
    ranks: BTreeMap<u32, RankLog>,
    /// The wall clock, ns since the epoch.
    now: i64,
    /// Module calls between the user's function and the collective in each
    /// pickled stack (`_wrapped_call_impl`/`_call_impl`/`forward` of nested
    /// modules, as in a real model's stack).
    modules: usize,
}

#[derive(Debug, Clone, Default)]
struct RankLog {
    entries: Vec<Entry>,
    /// Entries before it left the ring buffer (`pg_status` still counts them).
    dropped: usize,
    seq: HashMap<String, u64>,
    p2p_seq: HashMap<String, u64>,
    /// (local pg id, name) of the groups it used, in first-use order.
    pg_ids: Vec<String>,
}

#[derive(Debug, Clone)]
struct Frame {
    name: String,
    filename: String,
    line: i64,
}

#[derive(Debug, Clone)]
struct Entry {
    pg_id: i64,
    group: String,
    desc: String,
    collective_seq_id: u64,
    p2p_seq_id: u64,
    profiling_name: String,
    is_p2p: bool,
    sizes: Vec<Vec<i64>>,
    out_sizes: Vec<Vec<i64>>,
    dtype: String,
    state: CallState,
    created: i64,
    started: Option<i64>,
    completed: Option<i64>,
    frames: Vec<Frame>,
}

/// One call for [`FrRun::call`].
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub group: &'a str,
    pub op: &'a str,
    pub sizes: Vec<Vec<i64>>,
    pub dtype: &'a str,
    pub state: CallState,
    /// The innermost user function and line calling it.
    pub at: (&'a str, i64),
}

impl<'a> Call<'a> {
    pub fn all_reduce(group: &'a str, numel: i64) -> Self {
        Self {
            group,
            op: "all_reduce",
            sizes: vec![vec![numel]],
            dtype: "Float",
            state: CallState::Completed,
            at: ("train_step", 40),
        }
    }

    pub fn op(mut self, op: &'a str) -> Self {
        self.op = op;
        self
    }

    pub fn state(mut self, state: CallState) -> Self {
        self.state = state;
        self
    }

    pub fn at(mut self, function: &'a str, line: i64) -> Self {
        self.at = (function, line);
        self
    }
}

impl FrRun {
    /// `world` ranks in the default group `0` (`default_pg`), the clock at
    /// 2024-08-27 17:20 UTC.
    pub fn new(world: u32) -> Self {
        let mut r = Self {
            version: "2.4".into(),
            groups: Vec::new(),
            ranks: (0..world).map(|k| (k, RankLog::default())).collect(),
            now: 1_724_779_239_000_000_000,
            modules: 0,
        };
        r.group("0", "default_pg", (0..world).collect());
        r
    }

    pub fn group(&mut self, name: &str, desc: &str, members: Vec<u32>) {
        self.groups.push((name.into(), desc.into(), members));
    }

    /// Pickled stacks pass through `n` nested modules (3 frames each).
    pub fn module_depth(&mut self, n: usize) {
        self.modules = n;
    }

    /// Moves the wall clock on.
    pub fn wait_ms(&mut self, ms: i64) {
        self.now += ms * 1_000_000;
    }

    fn desc(&self, group: &str) -> String {
        self.groups
            .iter()
            .find(|g| g.0 == group)
            .map_or_else(String::new, |g| g.1.clone())
    }

    /// `ranks` each record `call` as their group's next collective.
    pub fn call(&mut self, ranks: &[u32], call: &Call) {
        let desc = self.desc(call.group);
        let now = self.now;
        for &r in ranks {
            let log = self.ranks.entry(r).or_default();
            let seq = log.seq.entry(call.group.into()).or_insert(0);
            *seq += 1;
            let seq = *seq;
            let p2p = log.p2p_seq.get(call.group).copied().unwrap_or(0);
            let e = entry(log, call, &desc, now, seq, p2p, false, call.op.into());
            log.entries.push(e);
        }
        self.now += 1_000_000;
    }

    /// `ranks` each record `calls` as one coalesced collective: their
    /// entries and a closing `coalesced` one (state of the first call)
    /// share the group's next sequence number.
    pub fn coalesced(&mut self, ranks: &[u32], calls: &[Call]) {
        let Some(first) = calls.first() else { return };
        let desc = self.desc(first.group);
        let now = self.now;
        for &r in ranks {
            let log = self.ranks.entry(r).or_default();
            let seq = log.seq.entry(first.group.into()).or_insert(0);
            *seq += 1;
            let seq = *seq;
            let p2p = log.p2p_seq.get(first.group).copied().unwrap_or(0);
            for c in calls {
                let e = entry(log, c, &desc, now, seq, p2p, false, c.op.into());
                log.entries.push(e);
            }
            let marker = Call {
                op: "coalesced",
                sizes: Vec::new(),
                ..first.clone()
            };
            let e = entry(
                log,
                &marker,
                &desc,
                now,
                seq,
                p2p,
                false,
                "coalesced".into(),
            );
            log.entries.push(e);
        }
        self.now += 1_000_000;
    }

    /// `rank` sends to (`send`) or receives from (`recv`) `peer`, both
    /// group ranks of `call.group`.
    pub fn p2p(&mut self, rank: u32, local: u32, peer: u32, call: &Call) {
        let desc = self.desc(call.group);
        let now = self.now;
        let log = self.ranks.entry(rank).or_default();
        let seq = log.seq.get(call.group).copied().unwrap_or(0);
        let p = log.p2p_seq.entry(call.group.into()).or_insert(0);
        *p += 1;
        let p = *p;
        let name = if call.op == "send" {
            format!("send {local}->{peer}")
        } else {
            format!("recv {local}<-{peer}")
        };
        let e = entry(log, call, &desc, now, seq, p, true, name);
        log.entries.push(e);
        self.now += 1_000_000;
    }

    /// Keeps only the last `n` entries of each rank, as a full ring buffer
    /// does.
    pub fn keep_last(&mut self, n: usize) {
        for log in self.ranks.values_mut() {
            log.dropped = log.entries.len().saturating_sub(n);
        }
    }

    pub fn ranks(&self) -> Vec<u32> {
        self.ranks.keys().copied().collect()
    }

    fn status(&self, log: &RankLog) -> BTreeMap<String, [i64; 3]> {
        let mut out = BTreeMap::new();
        for (id, name) in log.pg_ids.iter().enumerate() {
            let of = |pick: &dyn Fn(&Entry) -> bool| {
                log.entries
                    .iter()
                    .filter(|e| &e.group == name && !e.is_p2p && pick(e))
                    .map(|e| e.collective_seq_id as i64)
                    .max()
                    .unwrap_or(-1)
            };
            out.insert(
                id.to_string(),
                [
                    of(&|_| true),
                    of(&|e| e.state != CallState::Scheduled),
                    of(&|e| e.state == CallState::Completed),
                ],
            );
        }
        out
    }

    fn config(&self, rank: u32) -> BTreeMap<String, GroupOut> {
        self.groups
            .iter()
            .filter(|g| g.2.contains(&rank))
            .map(|(name, desc, members)| {
                let ranks: Vec<String> = members.iter().map(u32::to_string).collect();
                (
                    name.clone(),
                    GroupOut {
                        name: name.clone(),
                        desc: desc.clone(),
                        ranks: format!("[{}]", ranks.join(", ")),
                    },
                )
            })
            .collect()
    }

    /// `rank`'s dump as PyTorch pickles it (`FlightRecorder::dump`): keys
    /// in its insertion order, each distinct stack frame one dict shared by
    /// every entry that names it, as `torch::symbolize` hands them out.
    pub fn pickle(&self, rank: u32) -> Vec<u8> {
        let log = &self.ranks[&rank];
        let mut frames: HashMap<(String, String, i64), Rc<P>> = HashMap::new();
        let entries: Vec<P> = log
            .entries
            .iter()
            .enumerate()
            .skip(log.dropped)
            .map(|(i, e)| {
                let modules = (0..self.modules).rev().flat_map(|m| {
                    let file = "/usr/lib/python3/site-packages/torch/nn/modules/module.py";
                    [
                        (
                            "forward".to_string(),
                            "/work/model.py".to_string(),
                            100 + m as i64,
                        ),
                        ("_call_impl".into(), file.into(), 1750),
                        ("_wrapped_call_impl".into(), file.into(), 1739),
                    ]
                });
                let (inner, outer) = e.frames.split_at(e.frames.len().min(2));
                let stack: Vec<(String, String, i64)> = inner
                    .iter()
                    .map(|f| (f.name.clone(), f.filename.clone(), f.line))
                    .chain(modules)
                    .chain(
                        outer
                            .iter()
                            .map(|f| (f.name.clone(), f.filename.clone(), f.line)),
                    )
                    .collect();
                let stack = stack
                    .into_iter()
                    .map(|f| {
                        let d = frames.entry(f.clone()).or_insert_with(|| {
                            Rc::new(P::dict([
                                ("name", P::str(f.0)),
                                ("filename", P::str(f.1)),
                                ("line", P::Int(f.2)),
                            ]))
                        });
                        P::Shared(d.clone())
                    })
                    .collect();
                let sizes = |s: &[Vec<i64>]| {
                    P::List(
                        s.iter()
                            .map(|d| P::List(d.iter().map(|&x| P::Int(x)).collect()))
                            .collect(),
                    )
                };
                let dtypes = |n: usize| P::List(vec![P::str(&e.dtype); n]);
                P::dict([
                    ("frames", P::List(stack)),
                    ("record_id", P::Int(i as i64)),
                    ("pg_id", P::Int(e.pg_id)),
                    (
                        "process_group",
                        P::Tuple(vec![P::str(&e.group), P::str(&e.desc)]),
                    ),
                    ("collective_seq_id", P::Int(e.collective_seq_id as i64)),
                    ("p2p_seq_id", P::Int(e.p2p_seq_id as i64)),
                    ("op_id", P::Int(e.collective_seq_id as i64)),
                    (
                        "profiling_name",
                        P::str(format!("nccl:{}", e.profiling_name)),
                    ),
                    ("time_created_ns", P::Int(e.created)),
                    ("input_sizes", sizes(&e.sizes)),
                    ("input_dtypes", dtypes(e.sizes.len())),
                    ("output_sizes", sizes(&e.out_sizes)),
                    ("output_dtypes", dtypes(e.out_sizes.len())),
                    ("state", P::str(e.state.name())),
                    ("time_discovered_started_ns", P::opt(e.started)),
                    ("time_discovered_completed_ns", P::opt(e.completed)),
                    ("retired", P::Bool(e.state == CallState::Completed)),
                    ("timeout_ms", P::Int(600_000)),
                    ("is_p2p", P::Bool(e.is_p2p)),
                    ("thread_id", P::str("140245")),
                    ("thread_name", P::str("pt_main_thread")),
                ])
            })
            .collect();
        let config = self
            .config(rank)
            .into_iter()
            .map(|(k, g)| {
                let v = P::dict([
                    ("name", P::str(g.name)),
                    ("desc", P::str(g.desc)),
                    ("ranks", P::str(g.ranks)),
                ]);
                (P::str(k), v)
            })
            .collect();
        let status = self
            .status(log)
            .into_iter()
            .map(|(k, [q, s, c])| {
                let v = P::dict([
                    ("last_enqueued_collective", P::Int(q)),
                    ("last_started_collective", P::Int(s)),
                    ("last_completed_collective", P::Int(c)),
                ]);
                (P::str(k), v)
            })
            .collect();
        jit_pickle::to_vec(&P::dict([
            ("version", P::str(&self.version)),
            ("pg_config", P::Dict(config)),
            ("comm_lib_version", P::str("2.21.5")),
            ("pg_status", P::Dict(status)),
            ("entries", P::List(entries)),
        ]))
    }

    /// `rank`'s dump as PyTorch writes it in JSON.
    pub fn json(&self, rank: u32) -> Vec<u8> {
        let log = &self.ranks[&rank];
        let entries: Vec<serde_json::Value> = log
            .entries
            .iter()
            .enumerate()
            .skip(log.dropped)
            .map(|(i, e)| {
                serde_json::json!({
                    "collective_seq_id": e.collective_seq_id,
                    "input_dtypes": vec![e.dtype.clone(); e.sizes.len()],
                    "input_sizes": e.sizes,
                    "is_p2p": e.is_p2p,
                    "op_id": e.collective_seq_id,
                    "output_dtypes": vec![e.dtype.clone(); e.out_sizes.len()],
                    "output_sizes": e.out_sizes,
                    "p2p_seq_id": e.p2p_seq_id,
                    "pg_id": e.pg_id,
                    "process_group": [e.group, e.desc],
                    "profiling_name": format!("nccl:{}", e.profiling_name),
                    "record_id": i,
                    "retired": e.state == CallState::Completed,
                    "state": e.state.name(),
                    "thread_id": "140245",
                    "thread_name": "pt_main_thread",
                    "time_created_ns": e.created,
                    "time_discovered_completed_ns": e.completed.unwrap_or(0),
                    "time_discovered_started_ns": e.started.unwrap_or(0),
                    "timeout_ms": 600_000,
                })
            })
            .collect();
        let status: BTreeMap<String, BTreeMap<&str, String>> = self
            .status(log)
            .into_iter()
            .map(|(k, [q, s, c])| {
                (
                    k,
                    BTreeMap::from([
                        ("last_completed_collective", c.to_string()),
                        ("last_enqueued_collective", q.to_string()),
                        ("last_started_collective", s.to_string()),
                    ]),
                )
            })
            .collect();
        let mut dump = serde_json::json!({
            "comm_lib_version": "2.21.5",
            "pg_config": self.config(rank),
            "pg_status": status,
            "version": self.version,
        });
        if !entries.is_empty() {
            dump["entries"] = entries.into();
        }
        serde_json::to_vec(&dump).expect("a dump serializes")
    }

    /// Writes every rank's dump, `nccl_trace_rank_N` (pickle) or
    /// `nccl_trace_rank_N.json`.
    pub fn write(&self, dir: &std::path::Path, json: bool) -> std::io::Result<()> {
        for &r in self.ranks.keys() {
            let (name, bytes) = if json {
                (format!("nccl_trace_rank_{r}.json"), self.json(r))
            } else {
                (format!("nccl_trace_rank_{r}"), self.pickle(r))
            };
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn entry(
    log: &mut RankLog,
    call: &Call,
    desc: &str,
    now: i64,
    seq: u64,
    p2p: u64,
    is_p2p: bool,
    name: String,
) -> Entry {
    let pg_id = match log.pg_ids.iter().position(|g| g == call.group) {
        Some(i) => i,
        None => {
            log.pg_ids.push(call.group.into());
            log.pg_ids.len() - 1
        }
    } as i64;
    let out_sizes = match call.op {
        "all_gather" | "_allgather_base" => call
            .sizes
            .iter()
            .map(|s| s.iter().map(|x| x * 8).collect())
            .collect(),
        _ => call.sizes.clone(),
    };
    Entry {
        pg_id,
        group: call.group.into(),
        desc: desc.into(),
        collective_seq_id: seq,
        p2p_seq_id: p2p,
        profiling_name: name,
        is_p2p,
        sizes: call.sizes.clone(),
        out_sizes,
        dtype: call.dtype.into(),
        state: call.state,
        created: now,
        started: (call.state != CallState::Scheduled).then_some(now + 20_000),
        completed: (call.state == CallState::Completed).then_some(now + 500_000),
        frames: vec![
            Frame {
                name: call.op.trim_start_matches('_').into(),
                filename: "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"
                    .into(),
                line: 2696,
            },
            Frame {
                name: "wrapper".into(),
                filename: "/usr/lib/python3/site-packages/torch/distributed/c10d_logger.py".into(),
                line: 83,
            },
            Frame {
                name: call.at.0.into(),
                filename: "/work/train.py".into(),
                line: call.at.1,
            },
            Frame {
                name: "<module>".into(),
                filename: "/work/train.py".into(),
                line: 120,
            },
        ],
    }
}

#[derive(serde::Serialize)]
struct GroupOut {
    name: String,
    desc: String,
    ranks: String,
}

/// Where the bundled hung run lives, under `trace_collection/`.
pub const HANG_SAMPLE: &str = "llama_fsdp_8gpu_hang";

/// The bundled hung run (`trace_collection/llama_fsdp_8gpu_hang`): 8 ranks
/// of FSDP training, each step all-gathering 4 layers' parameters forward,
/// again backward, then reduce-scattering their gradients and all-reducing
/// the loss. In step 4 rank 5 skips backward (after its forward
/// all-gathers): the other 7 start backward's first all-gather and wait in
/// it until the 10-minute timeout dumps.
pub fn hang_sample() -> FrRun {
    let all: Vec<u32> = (0..8).collect();
    let others: Vec<u32> = all.iter().copied().filter(|&r| r != 5).collect();
    let mut run = FrRun::new(8);
    let layer = 4 * 1024 * 1024 / 8;
    let gather = Call {
        group: "0",
        op: "_allgather_base",
        sizes: vec![vec![layer]],
        dtype: "BFloat16",
        state: CallState::Completed,
        at: ("forward", 212),
    };
    let scatter = Call {
        op: "_reduce_scatter_base",
        sizes: vec![vec![layer * 8]],
        at: ("backward", 305),
        ..gather.clone()
    };
    let loss = Call::all_reduce("0", 1).at("train_step", 118);
    for step in 1..=4 {
        for _ in 0..4 {
            run.call(&all, &gather);
            run.wait_ms(12);
        }
        if step == 4 {
            // Rank 5's loss turns NaN and it skips backward; the others
            // start backward's first all-gather and wait for it.
            run.wait_ms(140);
            run.call(
                &others,
                &gather.clone().at("backward", 298).state(CallState::Started),
            );
            run.wait_ms(600_000);
            return run;
        }
        for _ in 0..4 {
            run.call(&all, &gather.clone().at("backward", 298));
            run.wait_ms(12);
        }
        for _ in 0..4 {
            run.call(&all, &scatter);
            run.wait_ms(14);
        }
        run.call(&all, &loss);
        run.wait_ms(40);
    }
    run
}
