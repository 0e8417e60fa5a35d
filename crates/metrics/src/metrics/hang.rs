//! Why a run hung, from its ranks' NCCL Flight Recorder dumps: per process
//! group, the first collective not every member completed, who never
//! scheduled it (most often the culprit), who waits in it, and what each
//! side was doing; ranks that called different operations (or sizes or
//! dtypes) at one sequence number; sends whose receive was never posted;
//! and how long ago each rank last completed anything.
//!
//! Collectives are matched across ranks by group and `collective_seq_id`
//! (the same count on every member), as PyTorch's `fr_trace` does; sends
//! and receives by their pair, among the calls still pending (a completed
//! send had its receive). A group's counters (`pg_status`) outlive the ring
//! buffer, so how far a rank got is known even where its entries wrapped.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rayon::prelude::*;
use serde::Serialize;

use crate::model::flight::{CallState, FrDump, FrEntry, Frame};

/// Operations whose members may pass different sizes (the root differs, or
/// the split is uneven): only the operation and dtypes are compared.
fn sizes_may_differ(op: &str) -> bool {
    op.contains("all_to_all")
        || op.ends_with("_v")
        || op.contains("gather") && !op.contains("all_gather")
        || op.contains("scatter") && !op.contains("reduce_scatter")
        || op == "coalesced"
}

/// What the dumps say, first finding first.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HangReport {
    /// `hang`, `desync` or `none`.
    pub verdict: &'static str,
    /// One sentence: the culprit and the call, or why nothing was found.
    pub headline: String,
    pub dumps: usize,
    /// Every rank a dump names as a group member, or that left a dump.
    pub world: Vec<u32>,
    /// Members of some group that left no dump (crashed before writing, or
    /// their file is missing).
    pub no_dump: Vec<u32>,
    /// Dump schema versions and the ranks that wrote each.
    pub versions: Vec<Versioned>,
    /// The latest time any rank saw anything happen (ns since the epoch).
    pub dumped_at_ns: Option<i64>,
    pub findings: Vec<Finding>,
    /// Every rank, the one that stopped longest ago first.
    pub ranks: Vec<RankLast>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Versioned {
    pub version: String,
    pub ranks: Vec<u32>,
}

/// One group's problem.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// `hang` (a collective not every member reached), `desync` (members
    /// called different things at one sequence number) or `p2p` (a send or
    /// receive whose peer never posted its side).
    pub kind: &'static str,
    pub group: String,
    pub desc: String,
    pub members: Vec<u32>,
    /// The collective's sequence number in its group (for p2p: the waiting
    /// side's p2p sequence number).
    pub seq: u64,
    /// The operation the waiting ranks called.
    pub op: String,
    pub input_sizes: Vec<Vec<i64>>,
    pub dtypes: Vec<String>,
    /// Members that never scheduled it (for p2p: the peer that never posted).
    pub missing: Vec<u32>,
    /// Members that scheduled or started it and wait.
    pub waiting: Vec<Waiting>,
    /// Members whose entry for it had left their ring buffer.
    pub unknown: Vec<u32>,
    /// Members that completed it, which no collective does without every
    /// member: non-empty only where the dumps contradict each other.
    pub completed: Vec<u32>,
    pub no_dump: Vec<u32>,
    /// What each missing member did last here, and where it waits instead.
    pub missing_detail: Vec<MissingRank>,
    /// For a desync: the field that differs and each variant's ranks.
    pub mismatch: Option<Mismatch>,
    /// Distinct Python stacks of the calls involved, with their ranks.
    pub stacks: Vec<Stack>,
    /// When the first waiting member created the call (ns since the epoch).
    pub since_ns: Option<i64>,
    /// Every missing member waits in another group's call: this group waits
    /// on that one, not the other way round.
    pub downstream: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Waiting {
    pub rank: u32,
    pub state: &'static str,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MissingRank {
    pub rank: u32,
    /// Its last completed call in this group.
    pub last_here: Option<CallRef>,
    /// Its oldest pending call in any group: where it is stuck instead.
    pub pending: Option<CallRef>,
}

/// A call, named for people.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRef {
    pub group: String,
    pub desc: String,
    pub op: String,
    pub seq: u64,
    pub p2p: bool,
    pub state: &'static str,
    /// When the rank last saw it progress (ns since the epoch).
    pub at_ns: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Mismatch {
    /// `operation`, `dtypes` or `sizes`.
    pub field: &'static str,
    pub seq: u64,
    /// The most common variant first.
    pub variants: Vec<Variant>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Variant {
    pub ranks: Vec<u32>,
    pub op: String,
    pub input_sizes: Vec<Vec<i64>>,
    pub output_sizes: Vec<Vec<i64>>,
    pub dtypes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stack {
    /// `waiting in it`, `pending elsewhere` or `last completed here`.
    pub role: &'static str,
    pub ranks: Vec<u32>,
    /// Innermost first.
    pub frames: Vec<StackFrame>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, Hash)]
pub struct StackFrame {
    pub name: String,
    pub file: String,
    pub line: i64,
}

impl From<&Frame> for StackFrame {
    fn from(f: &Frame) -> Self {
        Self {
            name: f.name.clone(),
            file: f.file.clone(),
            line: f.line,
        }
    }
}

/// When a rank last completed anything.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RankLast {
    pub rank: u32,
    pub last_completed: Option<CallRef>,
    /// Seconds between its last completion and the latest event of any rank.
    pub idle_s: Option<f64>,
    /// Seconds between the last thing it recorded at all (a call created,
    /// started or completed) and the latest event of any rank.
    pub quiet_s: Option<f64>,
    /// Idle or quiet much longer than the median rank: it stopped before
    /// the others.
    pub stands_out: bool,
    pub pending: Option<CallRef>,
}

fn call_ref(e: &FrEntry) -> CallRef {
    CallRef {
        group: e.call.group.to_string(),
        desc: e.call.desc.to_string(),
        op: e.call.op.to_string(),
        seq: if e.call.is_p2p {
            e.p2p_seq
        } else {
            e.collective_seq
        },
        p2p: e.call.is_p2p,
        state: e.state.name(),
        at_ns: e.last_seen_ns(),
    }
}

/// A group as the dumps define it: its name and members.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct GroupKey {
    name: String,
    members: Vec<u32>,
}

/// One rank's collectives in one group.
struct RankCalls<'d> {
    dump: &'d FrDump,
    calls: Calls<'d>,
    p2p: Vec<&'d FrEntry>,
    enqueued: u64,
    completed: u64,
}

/// One rank's collective entries in one group by sequence number, a
/// coalesced call several entries under one number: a reference an entry,
/// sorted once all are in (a map of vectors took two allocations an entry,
/// a third of reading 256 dumps' memory).
#[derive(Default)]
struct Calls<'d>(Vec<&'d FrEntry>);

impl<'d> Calls<'d> {
    fn push(&mut self, e: &'d FrEntry) {
        self.0.push(e);
    }

    /// In sequence-number order, a call's entries in the order pushed.
    fn sort(&mut self) {
        if !self.0.is_sorted_by_key(|e| e.collective_seq) {
            self.0.sort_by_key(|e| e.collective_seq);
        }
    }

    /// The entries of call `seq`.
    fn get(&self, seq: u64) -> Option<&[&'d FrEntry]> {
        let from = self.0.partition_point(|e| e.collective_seq < seq);
        let to = from + self.0[from..].partition_point(|e| e.collective_seq == seq);
        (to > from).then(|| &self.0[from..to])
    }

    fn first(&self) -> Option<u64> {
        self.0.first().map(|e| e.collective_seq)
    }

    fn last(&self) -> Option<u64> {
        self.0.last().map(|e| e.collective_seq)
    }

    /// Each call: its number and entries, in order.
    fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &[&'d FrEntry])> {
        (self.0.chunk_by(|a, b| a.collective_seq == b.collective_seq))
            .map(|c| (c[0].collective_seq, c))
    }
}

fn call_state(call: &[&FrEntry]) -> CallState {
    call.iter()
        .map(|e| e.state)
        .min()
        .unwrap_or(CallState::Scheduled)
}

/// The entries that describe what a call did (a coalesced group's marker
/// entry adds nothing when its items are there).
fn real<'a, 'd>(call: &'a [&'d FrEntry]) -> impl Iterator<Item = &'d FrEntry> + 'a {
    let only_marker = call.iter().all(|e| &*e.call.op == "coalesced");
    call.iter()
        .copied()
        .filter(move |e| only_marker || &*e.call.op != "coalesced")
}

fn dtypes(e: &FrEntry) -> Vec<String> {
    let mut d = e.call.io.input_dtypes.clone();
    d.extend_from_slice(&e.call.io.output_dtypes);
    d
}

pub fn analyze(dumps: &[FrDump]) -> HangReport {
    let mut warnings = Vec::new();
    let by_rank: BTreeMap<u32, &FrDump> = dumps.iter().map(|d| (d.rank, d)).collect();

    // Groups: a name with the members the rank's own `pg_config` gives; a
    // name without members anywhere gets the ranks whose entries use it.
    let mut variants: HashMap<&str, BTreeSet<Vec<u32>>> = HashMap::new();
    for d in dumps {
        for g in &d.groups {
            if let Some(r) = &g.ranks {
                variants.entry(&g.name).or_default().insert(r.clone());
            }
        }
    }
    // Each dump's entries by group, in order: a dump names few groups, and
    // each group's key is made once per dump rather than once per entry.
    let by_group: Vec<Vec<(&str, Vec<&FrEntry>)>> = dumps
        .iter()
        .map(|d| {
            let mut out: Vec<(&str, Vec<&FrEntry>)> = Vec::new();
            for e in &d.entries {
                match out.iter_mut().find(|(g, _)| **g == *e.call.group) {
                    Some((_, list)) => list.push(e),
                    None => out.push((&e.call.group, vec![e])),
                }
            }
            out
        })
        .collect();
    let mut users: HashMap<&str, BTreeSet<u32>> = HashMap::new();
    for (d, groups) in dumps.iter().zip(&by_group) {
        for (g, _) in groups {
            users.entry(g).or_default().insert(d.rank);
        }
    }
    let mut guessed = Vec::new();
    let key_of = |rank: u32, name: &str, d: &FrDump| -> Option<GroupKey> {
        let own = d.group(name).and_then(|g| g.ranks.clone());
        let members = own.or_else(|| {
            variants
                .get(name)
                .and_then(|v| v.iter().find(|m| m.contains(&rank)).cloned())
        })?;
        Some(GroupKey {
            name: name.to_owned(),
            members,
        })
    };
    let mut groups: BTreeMap<GroupKey, BTreeMap<u32, RankCalls>> = BTreeMap::new();
    let mut descs: HashMap<GroupKey, String> = HashMap::new();
    for (d, mine) in dumps.iter().zip(&by_group) {
        for (name, entries) in mine {
            let key = key_of(d.rank, name, d).unwrap_or_else(|| {
                guessed.push(entries[0].call.group.clone());
                GroupKey {
                    name: name.to_string(),
                    members: users[name].iter().copied().collect(),
                }
            });
            descs
                .entry(key.clone())
                .or_insert_with(|| entries[0].call.desc.to_string());
            let rc = groups
                .entry(key)
                .or_default()
                .entry(d.rank)
                .or_insert_with(|| RankCalls {
                    dump: d,
                    calls: Calls::default(),
                    p2p: Vec::new(),
                    enqueued: 0,
                    completed: 0,
                });
            for &e in entries {
                if e.call.is_p2p {
                    rc.p2p.push(e);
                } else {
                    rc.calls.push(e);
                }
            }
        }
    }
    guessed.sort();
    guessed.dedup();
    if !guessed.is_empty() {
        warnings.push(format!(
            "no member list (pg_config) for group(s) {}: their members are taken to be the ranks whose dumps use them",
            guessed.join(", ")
        ));
    }
    // Members that have a dump but no call in the group still count: they
    // never scheduled anything there.
    for (key, ranks) in &mut groups {
        for &m in &key.members {
            if let Some(d) = by_rank.get(&m) {
                ranks.entry(m).or_insert_with(|| RankCalls {
                    dump: d,
                    calls: Calls::default(),
                    p2p: Vec::new(),
                    enqueued: 0,
                    completed: 0,
                });
            }
        }
        for (r, rc) in ranks.iter_mut() {
            let status = by_rank[r].status(&key.name).unwrap_or_default();
            let pos = |v: Option<i64>| v.and_then(|x| u64::try_from(x).ok()).unwrap_or(0);
            rc.calls.sort();
            rc.enqueued = (rc.calls.last().unwrap_or(0)).max(pos(status.last_enqueued));
            rc.completed = rc
                .calls
                .iter()
                .filter(|(_, c)| call_state(c) == CallState::Completed)
                .map(|(s, _)| s)
                .max()
                .unwrap_or(0)
                .max(pos(status.last_completed));
        }
    }

    let mut world: BTreeSet<u32> = by_rank.keys().copied().collect();
    for k in groups.keys() {
        world.extend(&k.members);
    }
    let no_dump: Vec<u32> = world
        .iter()
        .copied()
        .filter(|r| !by_rank.contains_key(r))
        .collect();

    // Each rank's oldest pending call, in any group.
    let pending: HashMap<u32, &FrEntry> = dumps
        .iter()
        .filter_map(|d| {
            d.entries
                .iter()
                .find(|e| e.state != CallState::Completed)
                .map(|e| (d.rank, e))
        })
        .collect();

    // Groups are judged apart, so side by side (a 1,024-rank run has
    // hundreds); in their order.
    let groups: Vec<(&GroupKey, &BTreeMap<u32, RankCalls>)> = groups.iter().collect();
    let mut findings: Vec<Finding> = groups
        .par_iter()
        .map(|&(key, ranks)| {
            let desc = descs.get(key).cloned().unwrap_or_default();
            let absent: Vec<u32> = key
                .members
                .iter()
                .copied()
                .filter(|m| !by_rank.contains_key(m))
                .collect();
            let mut found: Vec<Finding> = collective_finding(key, &desc, ranks, &absent, &pending)
                .into_iter()
                .collect();
            found.extend(p2p_findings(key, &desc, ranks, &by_rank));
            found
        })
        .flatten()
        .collect();
    // A collective every member reached and none completed is in flight
    // when the dumps were taken; it is the finding only when nothing else
    // explains the hang (then the fault is below NCCL).
    let explained = |f: &Finding| {
        f.kind != "hang"
            || !f.missing.is_empty()
            || !f.no_dump.is_empty()
            || !f.completed.is_empty()
    };
    if findings.iter().any(explained) {
        findings.retain(explained);
    }
    // A group whose missing ranks all wait elsewhere waits on that group.
    for f in &mut findings {
        f.downstream = !f.missing.is_empty()
            && f.missing.iter().all(|m| {
                pending
                    .get(m)
                    .is_some_and(|p| !(*p.call.group == *f.group && p.collective_seq == f.seq))
            });
    }
    findings.sort_by_key(|f| {
        (
            f.kind != "desync",
            f.downstream,
            f.since_ns.unwrap_or(i64::MAX),
        )
    });

    let dumped_at_ns = dumps.iter().filter_map(FrDump::last_seen_ns).max();
    let ranks = rank_lasts(dumps, dumped_at_ns, &pending);

    let mut versions: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for d in dumps {
        versions.entry(&d.version).or_default().push(d.rank);
    }
    let versions: Vec<Versioned> = versions
        .into_iter()
        .map(|(v, mut ranks)| {
            ranks.sort_unstable();
            Versioned {
                version: if v.is_empty() {
                    "unknown".into()
                } else {
                    v.into()
                },
                ranks,
            }
        })
        .collect();
    if versions.len() > 1 {
        warnings.push(format!(
            "dumps of {} schema versions ({}): written by different PyTorch builds, or by two jobs",
            versions.len(),
            versions
                .iter()
                .map(|v| format!("{} by {}", v.version, ranges(&v.ranks)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if !no_dump.is_empty() {
        warnings.push(format!(
            "no dump from rank(s) {} of {}: a rank that crashed writes none",
            ranges(&no_dump),
            world.len()
        ));
    }
    let verdict = if findings.iter().any(|f| f.kind == "desync") {
        "desync"
    } else if findings.is_empty() {
        "none"
    } else {
        "hang"
    };
    let headline = headline(&findings, &ranks, &no_dump, dumps.len());
    HangReport {
        verdict,
        headline,
        dumps: dumps.len(),
        world: world.into_iter().collect(),
        no_dump,
        versions,
        dumped_at_ns,
        findings,
        ranks,
        warnings,
    }
}

fn collective_finding(
    key: &GroupKey,
    desc: &str,
    ranks: &BTreeMap<u32, RankCalls>,
    absent: &[u32],
    pending: &HashMap<u32, &FrEntry>,
) -> Option<Finding> {
    if ranks.is_empty() {
        return None;
    }
    let low = ranks.values().map(|r| r.completed).min()?;
    let high = ranks.values().map(|r| r.enqueued).max()?;
    let mismatch = first_mismatch(ranks, low + 1);
    if high <= low && mismatch.is_none() {
        return None;
    }
    let seq = mismatch.as_ref().map_or(low + 1, |m| m.seq);
    let mut missing = Vec::new();
    let mut waiting = Vec::new();
    let mut unknown = Vec::new();
    let mut completed = Vec::new();
    let mut stacks: Vec<(&'static str, u32, Vec<StackFrame>)> = Vec::new();
    let mut first: Option<&FrEntry> = None;
    let mut since: Option<i64> = None;
    for (&r, rc) in ranks {
        match rc.calls.get(seq) {
            Some(call) => {
                let state = call_state(call);
                if state == CallState::Completed {
                    completed.push(r);
                    let e = real(call).next().unwrap_or(call[0]);
                    first.get_or_insert(e);
                } else {
                    waiting.push(Waiting {
                        rank: r,
                        state: state.name(),
                    });
                    let e = real(call).next().unwrap_or(call[0]);
                    if first.is_none_or(|f| f.state == CallState::Completed) {
                        first = Some(e);
                    }
                    since = Some(since.map_or(e.created_ns, |s| s.min(e.created_ns)));
                    stacks.push(("waiting in it", r, frames(rc.dump, e)));
                }
            }
            None if rc.enqueued < seq => missing.push(r),
            None if rc.completed >= seq => {}
            None => unknown.push(r),
        }
    }
    if missing.is_empty() && waiting.is_empty() && mismatch.is_none() {
        return None;
    }
    let missing_detail: Vec<MissingRank> = missing
        .iter()
        .map(|&r| {
            let rc = &ranks[&r];
            let last = rc
                .calls
                .iter()
                .rev()
                .map(|(_, c)| c)
                .find(|c| call_state(c) == CallState::Completed)
                .and_then(|c| real(c).next());
            let elsewhere = pending.get(&r).copied();
            match elsewhere {
                Some(p) => stacks.push(("pending elsewhere", r, frames(rc.dump, p))),
                None => {
                    if let Some(l) = last {
                        stacks.push(("last completed here", r, frames(rc.dump, l)));
                    }
                }
            }
            MissingRank {
                rank: r,
                last_here: last.map(call_ref),
                pending: elsewhere.map(call_ref),
            }
        })
        .collect();
    let e = first;
    Some(Finding {
        kind: if mismatch.is_some() { "desync" } else { "hang" },
        group: key.name.clone(),
        desc: desc.to_owned(),
        members: key.members.clone(),
        seq,
        op: e.map_or_else(String::new, |e| e.call.op.to_string()),
        input_sizes: e.map_or_else(Vec::new, |e| e.call.io.input_sizes.clone()),
        dtypes: e.map_or_else(Vec::new, |e| e.call.io.input_dtypes.clone()),
        missing,
        waiting,
        unknown,
        completed,
        no_dump: absent.to_vec(),
        missing_detail,
        mismatch,
        stacks: merge_stacks(stacks),
        since_ns: since,
        downstream: false,
    })
}

/// The first sequence number, up to `last`, at which members called
/// different things. Only numbers every member with an entry for it kept
/// are compared.
fn first_mismatch(ranks: &BTreeMap<u32, RankCalls>, last: u64) -> Option<Mismatch> {
    let from = ranks.values().filter_map(|r| r.calls.first()).max()?;
    for seq in from..=last {
        let calls: Vec<(u32, &[&FrEntry])> = ranks
            .iter()
            .filter_map(|(r, rc)| Some((*r, rc.calls.get(seq)?)))
            .collect();
        if calls.len() < 2 || calls[1..].iter().all(|(_, c)| same(c, calls[0].1)) {
            continue;
        }
        let sig = |c: &[&FrEntry], field: &str| -> Vec<String> {
            real(c)
                .map(|e| match field {
                    "operation" => e.call.op.to_string(),
                    "dtypes" => format!("{:?}", dtypes(e)),
                    _ if sizes_may_differ(&e.call.op) => String::new(),
                    _ => format!("{:?} {:?}", e.call.io.input_sizes, e.call.io.output_sizes),
                })
                .collect()
        };
        for field in ["operation", "dtypes", "sizes"] {
            let mut by: BTreeMap<Vec<String>, Vec<u32>> = BTreeMap::new();
            for (r, c) in &calls {
                by.entry(sig(c, field)).or_default().push(*r);
            }
            if by.len() < 2 {
                continue;
            }
            let mut variants: Vec<Variant> = by
                .into_values()
                .map(|ranks| {
                    let c = calls.iter().find(|(r, _)| *r == ranks[0]).map(|x| x.1);
                    let e = c.and_then(|c| real(c).next());
                    let ops: Vec<&str> =
                        c.map_or_else(Vec::new, |c| real(c).map(|e| &*e.call.op).collect());
                    Variant {
                        // A coalesced call: every op in it.
                        op: ops.join("+"),
                        input_sizes: e.map_or_else(Vec::new, |e| e.call.io.input_sizes.clone()),
                        output_sizes: e.map_or_else(Vec::new, |e| e.call.io.output_sizes.clone()),
                        dtypes: e.map_or_else(Vec::new, dtypes),
                        ranks,
                    }
                })
                .collect();
            variants.sort_by_key(|v| (std::cmp::Reverse(v.ranks.len()), v.ranks[0]));
            return Some(Mismatch {
                field,
                seq,
                variants,
            });
        }
    }
    None
}

/// Whether two members' calls at one sequence number agree (what
/// `first_mismatch` checks field by field, without building the text).
fn same(a: &[&FrEntry], b: &[&FrEntry]) -> bool {
    let (mut a, mut b) = (real(a), real(b));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) => {
                let (a, b) = (&x.call.io, &y.call.io);
                let sizes = sizes_may_differ(&x.call.op)
                    || (a.input_sizes == b.input_sizes && a.output_sizes == b.output_sizes);
                if x.call.op != y.call.op
                    || a.input_dtypes != b.input_dtypes
                    || a.output_dtypes != b.output_dtypes
                    || !sizes
                {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// The pending sends (or receives) of one pair, with their ranks.
type Pending<'d> = Vec<(u32, &'d FrEntry)>;

/// Pending sends and receives whose peer has no pending counterpart.
fn p2p_findings(
    key: &GroupKey,
    desc: &str,
    ranks: &BTreeMap<u32, RankCalls>,
    by_rank: &BTreeMap<u32, &FrDump>,
) -> Vec<Finding> {
    let global = |local: u32| key.members.get(local as usize).copied();
    // (src, dst) in global ranks, with the pending calls of each side.
    let mut open: BTreeMap<(u32, u32), (Pending, Pending)> = BTreeMap::new();
    for (&r, rc) in ranks {
        for e in rc.p2p.iter().filter(|e| e.state != CallState::Completed) {
            let Some((s, d)) = e
                .call
                .peer
                .and_then(|(s, d)| Some((global(s)?, global(d)?)))
            else {
                continue;
            };
            let side = open.entry((s, d)).or_default();
            if &*e.call.op == "send" && s == r {
                side.0.push((r, e));
            } else if &*e.call.op == "recv" && d == r {
                side.1.push((r, e));
            }
        }
    }
    let mut out = Vec::new();
    for ((s, d), (sends, recvs)) in open {
        // The side that waits, the peer that should have posted.
        let (waiting, peer) = match (sends.first(), recvs.first()) {
            (Some(w), None) => (w, d),
            (None, Some(w)) => (w, s),
            _ => continue,
        };
        let (r, e) = *waiting;
        let has_dump = by_rank.contains_key(&peer);
        let mut stacks = vec![("waiting in it", r, frames(ranks[&r].dump, e))];
        let detail = ranks.get(&peer).map(|rc| {
            let pend = rc
                .dump
                .entries
                .iter()
                .find(|e| e.state != CallState::Completed);
            if let Some(p) = pend {
                stacks.push(("pending elsewhere", peer, frames(rc.dump, p)));
            }
            MissingRank {
                rank: peer,
                last_here: rc
                    .p2p
                    .iter()
                    .rev()
                    .find(|e| e.state == CallState::Completed)
                    .map(|e| call_ref(e)),
                pending: pend.map(call_ref),
            }
        });
        out.push(Finding {
            kind: "p2p",
            group: key.name.clone(),
            desc: desc.to_owned(),
            members: key.members.clone(),
            seq: e.p2p_seq,
            op: format!("{} {s}->{d}", e.call.op),
            input_sizes: e.call.io.input_sizes.clone(),
            dtypes: e.call.io.input_dtypes.clone(),
            missing: if has_dump { vec![peer] } else { Vec::new() },
            waiting: vec![Waiting {
                rank: r,
                state: e.state.name(),
            }],
            unknown: Vec::new(),
            completed: Vec::new(),
            no_dump: if has_dump { Vec::new() } else { vec![peer] },
            missing_detail: detail.into_iter().collect(),
            mismatch: None,
            stacks: merge_stacks(stacks),
            since_ns: Some(e.created_ns),
            downstream: false,
        });
    }
    out
}

fn frames(d: &FrDump, e: &FrEntry) -> Vec<StackFrame> {
    d.stack(e).iter().map(StackFrame::from).collect()
}

/// One stack per distinct (role, frames), with every rank that has it.
fn merge_stacks(stacks: Vec<(&'static str, u32, Vec<StackFrame>)>) -> Vec<Stack> {
    let mut out: Vec<Stack> = Vec::new();
    for (role, rank, frames) in stacks {
        if frames.is_empty() {
            continue;
        }
        match out
            .iter_mut()
            .find(|s| s.role == role && s.frames == frames)
        {
            Some(s) => s.ranks.push(rank),
            None => out.push(Stack {
                role,
                ranks: vec![rank],
                frames,
            }),
        }
    }
    out
}

/// How much longer than the median rank a rank must have been idle to
/// stand out: twice the median, and at least a second more.
fn stands_out(idle: f64, median: f64) -> bool {
    idle > 2.0 * median && idle - median >= 1.0
}

fn rank_lasts(
    dumps: &[FrDump],
    now: Option<i64>,
    pending: &HashMap<u32, &FrEntry>,
) -> Vec<RankLast> {
    let mut out: Vec<RankLast> = dumps
        .iter()
        .map(|d| {
            let last = d
                .entries
                .iter()
                .filter(|e| e.state == CallState::Completed)
                .max_by_key(|e| e.last_seen_ns());
            let since = |t: i64| now.map(|now| (now - t).max(0) as f64 / 1e9);
            RankLast {
                rank: d.rank,
                last_completed: last.map(call_ref),
                idle_s: last.and_then(|e| since(e.last_seen_ns())),
                quiet_s: d.last_seen_ns().and_then(since),
                stands_out: false,
                pending: pending.get(&d.rank).map(|e| call_ref(e)),
            }
        })
        .collect();
    let median = |pick: fn(&RankLast) -> Option<f64>| {
        let mut v: Vec<f64> = out.iter().filter_map(pick).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let (idle, quiet) = (median(|r| r.idle_s), median(|r| r.quiet_s));
    for r in &mut out {
        let odd = |v: Option<f64>, m: Option<f64>| v.zip(m).is_some_and(|(v, m)| stands_out(v, m));
        r.stands_out = odd(r.idle_s, idle) || odd(r.quiet_s, quiet);
    }
    // A rank that never completed anything first.
    let key = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
    out.sort_by(|a, b| {
        key(b.idle_s)
            .total_cmp(&key(a.idle_s))
            .then(key(b.quiet_s).total_cmp(&key(a.quiet_s)))
            .then(a.rank.cmp(&b.rank))
    });
    out
}

/// `group 3 (tp)`, or `group 3` when it has no description of its own.
pub fn group_name(group: &str, desc: &str) -> String {
    if desc.is_empty() || desc == "undefined" {
        format!("group {group}")
    } else {
        format!("group {group} ({desc})")
    }
}

fn headline(findings: &[Finding], ranks: &[RankLast], no_dump: &[u32], dumps: usize) -> String {
    let Some(f) = findings.first() else {
        let idle = ranks.iter().filter(|r| r.pending.is_some()).count();
        return match (no_dump.is_empty(), idle) {
            (true, 0) => format!("no hang: every call in the {dumps} dumps completed"),
            (true, _) => format!(
                "no hang found: {idle} rank(s) have calls in flight, but every member of their groups reached them"
            ),
            (false, _) => format!(
                "no hang found among the {dumps} dumps, but rank(s) {} left none",
                ranges(no_dump)
            ),
        };
    };
    let g = group_name(&f.group, &f.desc);
    match f.kind {
        "desync" => {
            let m = f.mismatch.as_ref().expect("a desync has its mismatch");
            let odd: Vec<u32> = m.variants[1..].iter().flat_map(|v| v.ranks.clone()).collect();
            let what = |v: &Variant| match m.field {
                "operation" => v.op.clone(),
                "dtypes" => format!("{} {}", v.op, v.dtypes.join(",")),
                _ => format!("{} {:?}", v.op, v.input_sizes),
            };
            format!(
                "desync in {g} at collective #{}: rank(s) {} called {} where {} called {}",
                m.seq,
                ranges(&odd),
                what(&m.variants[1]),
                ranges(&m.variants[0].ranks),
                what(&m.variants[0]),
            )
        }
        "p2p" => format!(
            "rank {} never posted its side of {} in {g}; rank {} waits",
            f.missing
                .first()
                .or(f.no_dump.first())
                .map_or_else(|| "?".into(), u32::to_string),
            f.op,
            f.waiting.first().map_or(0, |w| w.rank)
        ),
        _ if !f.missing.is_empty() && !f.completed.is_empty() => format!(
            "the dumps contradict each other: rank(s) {} never called {} #{} of {g}, yet rank(s) {} completed it (dumps of two jobs, or a restarted rank?)",
            ranges(&f.missing),
            f.op,
            f.seq,
            ranges(&f.completed)
        ),
        _ if !f.missing.is_empty() => {
            let elsewhere = f
                .missing_detail
                .iter()
                .find_map(|m| m.pending.as_ref())
                .map(|p| {
                    format!(
                        " (it waits in {} #{} of {})",
                        p.op,
                        p.seq,
                        group_name(&p.group, &p.desc)
                    )
                })
                .unwrap_or_default();
            format!(
                "rank(s) {} never called {} #{} of {g}; {} rank(s) wait in it{elsewhere}",
                ranges(&f.missing),
                f.op,
                f.seq,
                f.waiting.len()
            )
        }
        _ if !f.no_dump.is_empty() => format!(
            "{} #{} of {g} never completed; rank(s) {} left no dump (crashed?)",
            f.op,
            f.seq,
            ranges(&f.no_dump)
        ),
        _ => format!(
            "{} #{} of {g} never completed, though every member with a dump reached it ({} waiting): look below NCCL (network, a GPU fault)",
            f.op,
            f.seq,
            f.waiting.len()
        ),
    }
}

/// `0-3,5,7-8`.
pub fn ranges(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::flight::FrCall;
    use crate::synth::flight::{Call, FrRun};
    use std::path::Path;

    /// Every rank's dump written and read back, pickle or JSON.
    fn dumps(run: &FrRun, json: bool) -> Vec<FrDump> {
        run.ranks()
            .into_iter()
            .map(|r| {
                let bytes = if json { run.json(r) } else { run.pickle(r) };
                let name = format!("nccl_trace_rank_{r}");
                crate::read::flight_recorder::read(&bytes, Path::new(&name))
                    .unwrap()
                    .0
            })
            .collect()
    }

    /// A dump's entries out of number order (a coalesced call's two under
    /// one number, pushed apart): each call's entries together, in the
    /// order they came.
    #[test]
    fn calls_are_found_by_number_whatever_the_order_pushed() {
        let call = std::sync::Arc::new(FrCall {
            group: "0".into(),
            desc: "default_pg".into(),
            op: "all_reduce".into(),
            peer: None,
            is_p2p: false,
            io: Default::default(),
            timeout_ms: None,
        });
        // Told apart by when they were made.
        let entry = |created_ns, seq| FrEntry {
            collective_seq: seq,
            p2p_seq: 0,
            created_ns,
            seen_ns: None,
            call: call.clone(),
            stack: None.into(),
            state: CallState::Completed,
        };
        let entries = [entry(0, 3), entry(1, 1), entry(2, 3), entry(3, 2)];
        let mut calls = Calls::default();
        for e in &entries {
            calls.push(e);
        }
        calls.sort();
        let ids = |c: &[&FrEntry]| c.iter().map(|e| e.created_ns).collect::<Vec<_>>();
        let all: Vec<(u64, Vec<i64>)> = calls.iter().map(|(s, c)| (s, ids(c))).collect();
        assert_eq!(all, [(1, vec![1]), (2, vec![3]), (3, vec![0, 2])]);
        assert_eq!(calls.get(3).map(ids), Some(vec![0, 2]));
        assert_eq!(calls.get(0), None);
        assert_eq!(calls.get(4), None);
        assert_eq!((calls.first(), calls.last()), (Some(1), Some(3)));
        assert_eq!(calls.iter().next_back().map(|c| c.0), Some(3));
        assert!(Calls::default().get(1).is_none());
    }

    fn both(run: &FrRun) -> [HangReport; 2] {
        let p = analyze(&dumps(run, false));
        let j = analyze(&dumps(run, true));
        [p, j]
    }

    /// 8 ranks, 36 all-reduces done; rank 3 leaves the loop, the others
    /// enter #37 and wait.
    #[test]
    fn a_rank_that_never_enters_the_all_reduce() {
        let mut run = FrRun::new(8);
        for _ in 0..36 {
            run.call(&[0, 1, 2, 3, 4, 5, 6, 7], &Call::all_reduce("0", 1024));
        }
        run.wait_ms(30_000);
        let others = [0, 1, 2, 4, 5, 6, 7];
        run.call(
            &others,
            &Call::all_reduce("0", 1024)
                .state(CallState::Started)
                .at("train_step", 41),
        );
        run.wait_ms(600_000);
        for r in both(&run) {
            assert_eq!(r.verdict, "hang");
            let f = &r.findings[0];
            assert_eq!((f.kind, f.seq, f.op.as_str()), ("hang", 37, "all_reduce"));
            assert_eq!(f.missing, vec![3]);
            assert_eq!(f.waiting.iter().map(|w| w.rank).collect::<Vec<_>>(), others);
            assert_eq!(f.missing_detail[0].last_here.as_ref().unwrap().seq, 36);
            assert!(f.missing_detail[0].pending.is_none());
            assert!(r.headline.starts_with("rank(s) 3 never called all_reduce #37 of group 0 (default_pg); 7 rank(s) wait in it"), "{}", r.headline);
            // Every rank last completed #36 (created at t, completed at
            // t + 0.5 ms); the others created #37 at t + 1 ms + 30 s and
            // started it 20 µs later (the latest event): all are idle
            // 30.00052 s, but rank 3 has been quiet that long, the others
            // for 0.
            assert!(r
                .ranks
                .iter()
                .all(|x| (x.idle_s.unwrap() - 30.00052).abs() < 1e-6));
            assert_eq!(r.ranks[0].rank, 3);
            assert!(r.ranks[0].stands_out);
            assert!(
                (r.ranks[0].quiet_s.unwrap() - 30.00052).abs() < 1e-6,
                "{:?}",
                r.ranks[0]
            );
            assert!(r.ranks[1..]
                .iter()
                .all(|x| !x.stands_out && x.quiet_s == Some(0.0)));
        }
        // Where: the pickle carries stacks (the JSON writer has none).
        let [p, j] = both(&run);
        let s = &p.findings[0].stacks;
        assert_eq!(s[0].role, "waiting in it");
        assert_eq!(s[0].ranks, others);
        assert_eq!(s[0].frames[2].line, 41);
        assert_eq!(s[1].role, "last completed here");
        assert_eq!((s[1].ranks.as_slice(), s[1].frames[2].line), (&[3][..], 40));
        assert!(j.findings[0].stacks.is_empty());
    }

    #[test]
    fn a_rank_calling_all_gather_where_the_others_all_reduce() {
        let mut run = FrRun::new(4);
        for _ in 0..5 {
            run.call(&[0, 1, 2, 3], &Call::all_reduce("0", 256));
        }
        let stuck = Call::all_reduce("0", 256).state(CallState::Started);
        run.call(&[0, 1, 3], &stuck);
        run.call(&[2], &stuck.clone().op("all_gather"));
        for r in both(&run) {
            assert_eq!(r.verdict, "desync");
            let m = r.findings[0].mismatch.as_ref().unwrap();
            assert_eq!((m.field, m.seq), ("operation", 6));
            assert_eq!(m.variants[0].ranks, vec![0, 1, 3]);
            assert_eq!(
                (m.variants[1].ranks.as_slice(), m.variants[1].op.as_str()),
                (&[2][..], "all_gather")
            );
            assert_eq!(
                r.headline,
                "desync in group 0 (default_pg) at collective #6: rank(s) 2 called all_gather where 0-1,3 called all_reduce"
            );
        }
    }

    #[test]
    fn a_size_mismatch() {
        let mut run = FrRun::new(4);
        run.call(&[0, 1, 2, 3], &Call::all_reduce("0", 256));
        let stuck = Call::all_reduce("0", 1024).state(CallState::Started);
        run.call(&[0, 2, 3], &stuck);
        run.call(&[1], &Call::all_reduce("0", 1000).state(CallState::Started));
        for r in both(&run) {
            let m = r.findings[0].mismatch.as_ref().unwrap();
            assert_eq!((m.field, m.seq), ("sizes", 2));
            assert_eq!(m.variants[1].ranks, vec![1]);
            assert_eq!(m.variants[1].input_sizes, vec![vec![1000]]);
            assert!(
                r.headline.contains(
                    "rank(s) 1 called all_reduce [[1000]] where 0,2-3 called all_reduce [[1024]]"
                ),
                "{}",
                r.headline
            );
        }
    }

    /// Pipeline stages 0 -> 1: the second send waits, rank 1 never posts
    /// the matching recv (it waits in an all-reduce of its own instead).
    #[test]
    fn a_send_whose_recv_never_posts() {
        let mut run = FrRun::new(2);
        let send = Call::all_reduce("0", 4096).op("send");
        let recv = Call::all_reduce("0", 4096).op("recv");
        run.p2p(0, 0, 1, &send);
        run.p2p(1, 1, 0, &recv);
        run.p2p(0, 0, 1, &send.clone().state(CallState::Started));
        run.call(
            &[1],
            &Call::all_reduce("0", 8)
                .state(CallState::Scheduled)
                .at("log_loss", 77),
        );
        for r in both(&run) {
            let p2p = r.findings.iter().find(|f| f.kind == "p2p").unwrap();
            assert_eq!(p2p.op, "send 0->1");
            assert_eq!(p2p.missing, vec![1]);
            assert_eq!(p2p.waiting[0].rank, 0);
            let pending = p2p.missing_detail[0].pending.as_ref().unwrap();
            assert_eq!((pending.op.as_str(), pending.seq), ("all_reduce", 1));
            // Rank 1's all-reduce waits for rank 0, which waits in the send:
            // that finding is downstream of the send.
            let coll = r.findings.iter().find(|f| f.kind == "hang").unwrap();
            assert_eq!(coll.missing, vec![0]);
            assert!(coll.downstream);
            assert_eq!(r.findings[0].kind, "p2p", "{:?}", r.findings);
        }
    }

    /// Groups: default (0-3), tp 0-1 and 2-3, dp 0,2 and 1,3. Rank 1 skips
    /// its tp all-reduce; only tp group `1` hangs.
    #[test]
    fn only_the_tp_group_hangs() {
        let mut run = FrRun::new(4);
        run.group("1", "tp", vec![0, 1]);
        run.group("2", "tp", vec![2, 3]);
        run.group("3", "dp", vec![0, 2]);
        run.group("4", "dp", vec![1, 3]);
        for _ in 0..3 {
            run.call(&[0, 1], &Call::all_reduce("1", 64));
            run.call(&[2, 3], &Call::all_reduce("2", 64));
            run.call(&[0, 2], &Call::all_reduce("3", 64));
            run.call(&[1, 3], &Call::all_reduce("4", 64));
        }
        run.call(&[0], &Call::all_reduce("1", 64).state(CallState::Started));
        run.call(&[2, 3], &Call::all_reduce("2", 64));
        for r in both(&run) {
            assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
            let f = &r.findings[0];
            assert_eq!((f.group.as_str(), f.desc.as_str(), f.seq), ("1", "tp", 4));
            assert_eq!(
                (f.missing.clone(), f.members.clone()),
                (vec![1], vec![0, 1])
            );
        }
    }

    #[test]
    fn a_finished_run_has_no_hang() {
        let mut run = FrRun::new(2);
        run.call(&[0, 1], &Call::all_reduce("0", 64));
        for r in both(&run) {
            assert_eq!(r.verdict, "none");
            assert!(r.findings.is_empty());
            assert_eq!(r.headline, "no hang: every call in the 2 dumps completed");
        }
    }

    /// The ring buffer kept only the last 3 entries; `pg_status` still
    /// says how far each rank got.
    #[test]
    fn a_wrapped_ring_buffer_counts_from_pg_status() {
        let mut run = FrRun::new(3);
        for _ in 0..10 {
            run.call(&[0, 1, 2], &Call::all_reduce("0", 64));
        }
        run.call(
            &[0, 1],
            &Call::all_reduce("0", 64).state(CallState::Started),
        );
        for _ in 0..3 {
            run.call(
                &[0, 1],
                &Call::all_reduce("0", 64)
                    .op("broadcast")
                    .state(CallState::Scheduled),
            );
        }
        run.keep_last(3);
        for r in both(&run) {
            let f = &r.findings[0];
            // Ranks 0 and 1 kept only #12-14; #11 left their buffer.
            assert_eq!(
                (f.seq, f.missing.clone(), f.unknown.clone()),
                (11, vec![2], vec![0, 1])
            );
        }
    }

    #[test]
    fn a_rank_without_a_dump_and_mixed_versions() {
        let mut run = FrRun::new(4);
        run.call(&[0, 1, 2, 3], &Call::all_reduce("0", 64));
        run.call(
            &[0, 1, 2],
            &Call::all_reduce("0", 64).state(CallState::Started),
        );
        let mut d = dumps(&run, false);
        d.retain(|d| d.rank != 3);
        d[0].version = "2.7".into();
        let r = analyze(&d);
        assert_eq!(r.no_dump, vec![3]);
        let f = &r.findings[0];
        assert_eq!((f.missing.clone(), f.no_dump.clone()), (vec![], vec![3]));
        assert!(
            r.headline.contains("rank(s) 3 left no dump"),
            "{}",
            r.headline
        );
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("2 schema versions (2.4 by 1-2; 2.7 by 0)")),
            "{:?}",
            r.warnings
        );
    }

    /// A process killed while writing: the entries before the cut are read.
    #[test]
    fn truncated_dumps_read_to_their_last_whole_entry() {
        let mut run = FrRun::new(2);
        for _ in 0..20 {
            run.call(&[0, 1], &Call::all_reduce("0", 64));
        }
        for json in [false, true] {
            let bytes = if json { run.json(0) } else { run.pickle(0) };
            let cut = &bytes[..bytes.len() * 2 / 3];
            let (d, w) =
                crate::read::flight_recorder::read(cut, Path::new("nccl_trace_rank_0")).unwrap();
            assert!(d.truncated);
            assert!(
                (5..20).contains(&d.entries.len()),
                "{json}: {}",
                d.entries.len()
            );
            assert!(d
                .entries
                .iter()
                .enumerate()
                .all(|(i, e)| e.collective_seq == i as u64 + 1));
            assert!(w[0].text.contains("cut off"), "{w:?}");
            assert_eq!(w[0].kind, crate::model::warning::Kind::Damaged);
        }
    }

    /// Ranks 0 and 1 coalesce two all-reduces into call #2 (two entries and
    /// the closing `coalesced` one, one sequence number); rank 2 makes one.
    #[test]
    fn a_coalesced_call_against_a_single_one() {
        let mut run = FrRun::new(3);
        run.call(&[0, 1, 2], &Call::all_reduce("0", 64));
        let stuck = Call::all_reduce("0", 64).state(CallState::Started);
        run.coalesced(&[0, 1], &[stuck.clone(), stuck.clone()]);
        run.call(&[2], &stuck);
        for r in both(&run) {
            let m = r.findings[0].mismatch.as_ref().unwrap();
            assert_eq!((m.field, m.seq), ("operation", 2));
            assert_eq!(m.variants[0].op, "all_reduce+all_reduce");
            assert_eq!(
                (m.variants[1].op.as_str(), m.variants[1].ranks.as_slice()),
                ("all_reduce", &[2][..])
            );
        }
        // Coalesced on every rank: no desync, and the call is in flight.
        let mut run = FrRun::new(2);
        run.coalesced(
            &[0, 1],
            &[Call::all_reduce("0", 64), Call::all_reduce("0", 8)],
        );
        for r in both(&run) {
            assert_eq!(r.verdict, "none", "{:?}", r.findings);
        }
    }

    #[test]
    fn rank_ranges() {
        assert_eq!(ranges(&[7, 0, 1, 2, 4, 5]), "0-2,4-5,7");
        assert_eq!(ranges(&[]), "");
    }
}
