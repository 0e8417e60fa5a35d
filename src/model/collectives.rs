//! Matching one collective across the ranks that took part in it, and clock
//! alignment from those matches. The n-th collective a rank issues in a process
//! group is the n-th every other member issues in it (NCCL requires this order),
//! and a collective ends on all members at nearly the same moment.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::slab::{Reader, Slab};
use super::time::{median, Ns};
use super::trace::{Offset, Trace};
use super::DeviceOp;

/// The collectives matched across ranks: per process group, the ranks that
/// issue in it and each one's communication ops in issue order, from which an
/// instance's members are found by its (group, seq) rather than held (4 bytes
/// per communication op, where a list of members per instance took 8 and a
/// vector). An instance's id is its place in order (groups by name, then
/// seq), made from its group's first id, not held (8 bytes a collective).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instances {
    groups: Vec<Seqs>,
    len: usize,
}

/// One group's sequences: `ops[k]` are the op indices of rank index
/// `ranks[k]`, cut to the shortest; spilled to a temporary file with the
/// ranks' collectives (see `slab`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seqs {
    name: Arc<str>,
    ranks: Vec<u32>,
    ops: Vec<Slab<u32>>,
    /// The id of its first instance.
    first: usize,
    /// The longest member's calls before the cut to the shortest.
    longest: u32,
    /// Where matching stopped because the members disagree there, and on
    /// what (see `instances`).
    stopped: Option<(u32, Arc<str>)>,
    /// Per member whose profiler started earlier than the others': (its
    /// rank number, its calls before the first `Seq` every member has),
    /// left out of `ops` (see [`resync`]).
    lead: Vec<(u32, u32)>,
}

impl Seqs {
    /// Positions in each sequence.
    fn positions(&self) -> usize {
        self.ops.first().map_or(0, |o| o.len())
    }

    /// The id of the instance at position `seq`, if one is there (every
    /// position up to the cut is one).
    fn id_at(&self, seq: usize) -> Option<usize> {
        (seq < self.positions()).then_some(self.first + seq)
    }
}

impl Instances {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Instance `id` (panics past the end, as indexing does).
    pub fn get(&self, id: usize) -> Instance<'_> {
        assert!(id < self.len, "instance {id} of {}", self.len);
        // The last group starting at or before `id`: groups without
        // instances share their first id with the next.
        let g = self.groups.partition_point(|s| s.first <= id) - 1;
        let seqs = &self.groups[g];
        Instance {
            group: &seqs.name,
            seq: id - seqs.first,
            seqs,
        }
    }

    /// The id of the instance at position `seq` of group `group`, if one is
    /// there (no per-collective table: a search of the group's skips).
    pub fn id_of(&self, group: &str, seq: usize) -> Option<usize> {
        let g = self
            .groups
            .binary_search_by(|s| (*s.name).cmp(group))
            .ok()?;
        self.groups[g].id_at(seq)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Instance<'_>> + '_ {
        (0..self.len()).map(|id| self.get(id))
    }

    /// The instance `t`'s op `oi` is a member of (see [`position_of`]).
    pub fn of_op(&self, t: &super::RankTimeline, oi: usize) -> Option<usize> {
        let (g, seq) = position_of(t, oi)?;
        let seq = seq.checked_sub(self.lead(&g, t.rank))?;
        self.id_of(&g, seq)
    }

    /// How many of rank `rank`'s first calls in `channel` precede the
    /// others' traces (left out by [`resync`]).
    pub fn lead(&self, channel: &str, rank: u32) -> usize {
        self.groups
            .binary_search_by(|s| (*s.name).cmp(channel))
            .ok()
            .and_then(|g| self.groups[g].lead.iter().find(|l| l.0 == rank))
            .map_or(0, |l| l.1 as usize)
    }

    /// Calls `f` with each instance's id, the instance and its members' ops
    /// (in the order of [`Instance::pairs`]), in order. Each member's
    /// sequence and ops are read a block at a time (see [`member_readers`]),
    /// so that a pass over collectives on disk reads each file in blocks
    /// rather than a page of each rank's in turn.
    pub fn walk<'s>(&'s self, trace: &Trace, f: impl FnMut(usize, Instance<'s>, &[MemberOp])) {
        self.walk_in(trace, WALK_BYTES, MIN_VALUES, f);
    }

    /// [`Instances::walk`] with blocks as [`member_readers`] makes them of
    /// `bytes` and `min`.
    fn walk_in<'s>(
        &'s self,
        trace: &Trace,
        bytes: usize,
        min: usize,
        mut f: impl FnMut(usize, Instance<'s>, &[MemberOp]),
    ) {
        let mut members: Vec<MemberOp> = Vec::new();
        for seqs in &self.groups {
            let mut readers = member_readers(trace, &seqs.ranks, &seqs.ops, bytes, min);
            for seq in 0..seqs.positions() {
                members.clear();
                for (r, seq_of, op_of) in &mut readers {
                    let o = seq_of.get(seq) as usize;
                    members.push(MemberOp {
                        r: *r,
                        o,
                        op: op_of.get(o),
                    });
                }
                let i = Instance {
                    group: &seqs.name,
                    seq,
                    seqs,
                };
                f(seqs.first + seq, i, &members);
            }
        }
    }

    /// Op indices held in memory, and spilled to a file.
    pub fn held_spilled(&self) -> (usize, usize) {
        let mut n = (0, 0);
        for o in self.groups.iter().flat_map(|g| &g.ops) {
            if o.is_spilled() {
                n.1 += o.len();
            } else {
                n.0 += o.len();
            }
        }
        n
    }
}

/// What a pass over every collective's members holds of them at a time,
/// over a group's members ([`Instances::walk`]), and the fewest values a
/// member's block holds (15 KB of sequence and ops).
const WALK_BYTES: usize = 4 << 20;
const MIN_VALUES: usize = 256;

/// Each member's rank index (`ranks[k]`) with readers of its sequence
/// (`ops[k]`) and of its rank's ops, reading as many of each a block:
/// `bytes` over the members, at least `min` each.
fn member_readers<'a>(
    trace: &'a Trace,
    ranks: &[u32],
    ops: &'a [Slab<u32>],
    bytes: usize,
    min: usize,
) -> Vec<(usize, Reader<'a, u32>, Reader<'a, DeviceOp>)> {
    let each = std::mem::size_of::<u32>() + std::mem::size_of::<DeviceOp>();
    let values = (bytes / ranks.len().max(1) / each).max(min);
    ranks
        .iter()
        .zip(ops)
        .map(|(&r, o)| {
            let r = r as usize;
            (
                r,
                o.reader(values * std::mem::size_of::<u32>()),
                trace.ranks[r]
                    .ops
                    .reader(values * std::mem::size_of::<DeviceOp>()),
            )
        })
        .collect()
}

/// A member of a matched collective as [`Instances::walk`] gives it: its
/// rank index, op index and a copy of its op.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberOp {
    pub r: usize,
    pub o: usize,
    pub op: DeviceOp,
}

/// When the last of `members` started (the transfer's start, barrier model).
pub fn last_start_of(members: &[MemberOp]) -> Ns {
    members.iter().map(|m| m.op.start).max().unwrap_or(Ns::ZERO)
}

/// The member of `members` that started last (the lowest rank index among
/// equals) as (rank index, op index), and the wait it caused: how long after
/// the next-latest member it started. `None` with fewer than two members.
pub fn latest_of(members: &[MemberOp]) -> Option<(usize, usize, Ns)> {
    // The latest and next-latest in one pass, ordered as a sort by
    // (start, reversed rank index) would order them.
    let key = |s: Ns, r: usize| (s, std::cmp::Reverse(r));
    let (mut top, mut next): (Option<(Ns, usize, usize)>, Option<Ns>) = (None, None);
    for m in members {
        let (s, r, o) = (m.op.start, m.r, m.o);
        match top {
            Some((ts, tr, _)) if key(s, r) <= key(ts, tr) => {
                next = next.max(Some(s));
            }
            _ => {
                next = top.map(|t| t.0).max(next);
                top = Some((s, r, o));
            }
        }
    }
    let ((latest, r, o), next) = (top?, next?);
    Some((r, o, latest - next))
}

/// Who made whom wait at one collective (barrier model). Each member waits
/// from its start until the last member starts (clamped to its op). Over
/// each stretch of that wait, the members still absent share it equally:
/// the Shapley split of waiting for the latest of several arrivals. Two
/// members late together share the waiting they cause, where charging only
/// the last one's margin over the next-latest would charge almost nothing.
/// Every member's wait is charged in full to the members that arrived
/// after it, and none beyond the time it spent inside its op.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Blame {
    /// Member starts and wait ends, ascending, deduplicated: the stretches
    /// between them have one set of waiters and one of absentees.
    points: Vec<Ns>,
    /// Starts, ascending; wait ends (start + wait), ascending.
    starts: Vec<Ns>,
    ends: Vec<Ns>,
    /// Per member (as given): its start and wait.
    members: Vec<(Ns, Ns)>,
}

impl Blame {
    pub fn of(members: &[MemberOp]) -> Self {
        let last = last_start_of(members);
        Self::of_waits(
            members
                .iter()
                .map(|m| (m.op.start, (last - m.op.start).clamp(Ns::ZERO, m.op.dur)))
                .collect(),
        )
    }

    /// From each member's (start, wait), the wait already clamped to its op.
    pub fn of_waits(members: Vec<(Ns, Ns)>) -> Self {
        let mut starts: Vec<Ns> = members.iter().map(|m| m.0).collect();
        let mut ends: Vec<Ns> = members.iter().map(|m| m.0 + m.1).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        let mut points: Vec<Ns> = starts.iter().chain(&ends).copied().collect();
        points.sort_unstable();
        points.dedup();
        Self {
            points,
            starts,
            ends,
            members,
        }
    }

    /// Member `i`'s wait.
    pub fn wait(&self, i: usize) -> Ns {
        self.members[i].1
    }

    /// Over each stretch `[p, q)` between points, `f(len, waiting, absent,
    /// p)` summed before each point: `out[k]` is the sum over the
    /// stretches ending at or before `points[k]`.
    fn cumulative(&self, mut per_stretch: impl FnMut(f64, f64, f64, Ns) -> f64) -> Vec<f64> {
        let n = self.starts.len();
        let mut out = Vec::with_capacity(self.points.len());
        let mut sum = 0.0;
        out.push(0.0);
        for w in self.points.windows(2) {
            let (p, q) = (w[0], w[1]);
            // Arrived by p, and of them those whose wait ended by p.
            let arrived = self.starts.partition_point(|&s| s <= p);
            let done = self.ends.partition_point(|&e| e <= p);
            let (waiting, absent) = (arrived - done, n - arrived);
            if waiting > 0 && absent > 0 {
                sum += per_stretch((q - p).as_f64(), waiting as f64, absent as f64, p);
            }
            out.push(sum);
        }
        out
    }

    fn at(&self, t: Ns) -> usize {
        self.points.partition_point(|&p| p < t)
    }

    /// The wait charged to each member (as given), in ns: the sum over the
    /// stretches before its start of (length × waiters / absentees).
    pub fn charged(&self) -> Vec<Ns> {
        let cum = self.cumulative(|len, waiting, absent, _| len * waiting / absent);
        self.members
            .iter()
            .map(|&(s, _)| Ns::rounded(cum[self.at(s)]))
            .collect()
    }

    /// The part of each member's wait that the members for which `late`
    /// holds explain (their share of each stretch it waited through), in
    /// ns: what it would not have waited had they been on time.
    pub fn explained_by(&self, late: &[bool]) -> Vec<Ns> {
        let mut late_starts: Vec<Ns> = self
            .members
            .iter()
            .zip(late)
            .filter(|(_, &l)| l)
            .map(|(m, _)| m.0)
            .collect();
        late_starts.sort_unstable();
        // Per stretch, for one waiter: length × late absentees / absentees.
        let cum = self.cumulative(|len, _, absent, p| {
            let late_absent = late_starts.len() - late_starts.partition_point(|&s| s <= p);
            len * late_absent as f64 / absent
        });
        self.members
            .iter()
            .map(|&(s, w)| Ns::rounded(cum[self.at(s + w)] - cum[self.at(s)]))
            .collect()
    }
}

/// One collective call seen on several ranks (a view into [`Instances`]).
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    /// Shared by the group's instances.
    pub group: &'a Arc<str>,
    pub seq: usize,
    seqs: &'a Seqs,
}

impl<'a> Instance<'a> {
    /// Its members as (rank index, op index), to index `Trace::ranks` and `ops`.
    pub fn pairs(self) -> impl ExactSizeIterator<Item = (usize, usize)> + 'a {
        let seq = self.seq;
        let s = self.seqs;
        s.ranks
            .iter()
            .zip(&s.ops)
            .map(move |(&r, ops)| (r as usize, ops[seq] as usize))
    }

    /// Its members' rank indices (in `Trace::ranks`), without reading
    /// their ops.
    pub fn ranks(&self) -> &'a [u32] {
        &self.seqs.ranks
    }

    /// How many members it has.
    pub fn len(&self) -> usize {
        self.seqs.ranks.len()
    }

    /// Never: an instance has two members or more.
    pub fn is_empty(&self) -> bool {
        self.seqs.ranks.is_empty()
    }

    /// Its members' ops, read from `trace` (for one instance, in tests; a
    /// pass over them all reads them with [`Instances::walk`]).
    #[cfg(test)]
    pub fn member_ops(&self, trace: &Trace) -> Vec<MemberOp> {
        self.pairs()
            .map(|(r, o)| MemberOp {
                r,
                o,
                op: trace.ranks[r].ops[o].clone(),
            })
            .collect()
    }

    /// When its last member started (see [`last_start_of`]).
    #[cfg(test)]
    pub fn last_start(&self, trace: &Trace) -> Ns {
        last_start_of(&self.member_ops(trace))
    }

    /// The member that started last and the wait it caused (see
    /// [`latest_of`]).
    #[cfg(test)]
    pub fn latest(&self, trace: &Trace) -> Option<(usize, usize, Ns)> {
        latest_of(&self.member_ops(trace))
    }
}

/// A matched collective's figures as held (`derive::instances::Rows` makes
/// and reads them): plain values, its group and kernel name by index, so
/// that a run's rows can go to a temporary file with its collectives (see
/// `slab`). 104 bytes, where a row with its names and options took 152.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Figures {
    pub last_by: Ns,
    pub last_start: Ns,
    pub caused: Ns,
    pub wait: Ns,
    pub transfer: Ns,
    pub start: Ns,
    pub end: Ns,
    /// Message bytes and nccl-tests' S, each known where `sized` says so.
    pub bytes: u64,
    pub data_bytes: u64,
    pub id: u32,
    pub group: u32,
    pub seq: u32,
    pub name: u32,
    pub size: u32,
    pub last_rank: u32,
    pub kind: Option<super::CollKind>,
    /// Bit 0: `bytes` is known; bit 1: `data_bytes` is.
    pub sized: u8,
    /// Written as zeros: a plain value has no padding.
    pub pad: [u8; 6],
}

/// The group of collectives that record none.
pub const DEFAULT: &str = "default";

/// The group a communication op belongs to: its process group name when the
/// trace records one, else one sequence per rank (the default group).
pub fn group_of<'t>(t: &'t super::RankTimeline, op: &super::DeviceOp) -> &'t str {
    t.coll_meta(op)
        .and_then(|m| m.pg_name)
        .map_or(DEFAULT, |id| t.name(id))
}

/// The sequence a communication op is matched in: its process group (see
/// [`group_of`]), or for a point-to-point `send`/`recv` that names its peer,
/// the group's (source, destination) pair, so that a send pairs with its
/// recv by their order between those two ranks, not with the group's next
/// collective.
pub fn channel_of<'t>(
    t: &'t super::RankTimeline,
    op: &super::DeviceOp,
) -> std::borrow::Cow<'t, str> {
    let g = group_of(t, op);
    let p2p = t.coll_meta(op).and_then(|m| {
        let peer = m.peer?;
        match t.name(m.name) {
            "send" => Some((t.rank, peer)),
            "recv" => Some((peer, t.rank)),
            _ => None,
        }
    });
    match p2p {
        Some((src, dst)) => format!("{g} p2p {src}->{dst}").into(),
        None => g.into(),
    }
}

/// The process group of a channel named by [`channel_of`].
pub fn group_of_channel(channel: &str) -> &str {
    channel.split_once(" p2p ").map_or(channel, |(g, _)| g)
}

/// How the members' ops at one position agree, for matching by position:
/// kind, then (where both record them) message size, element size and
/// sequence number.
fn agree(
    a: &super::DeviceOp,
    am: Option<&super::CollMeta>,
    b: &super::DeviceOp,
    bm: Option<&super::CollMeta>,
) -> Result<(), &'static str> {
    if a.coll != b.coll {
        return Err("kind");
    }
    if let (Some(x), Some(y)) = (am, bm) {
        if let (Some(p), Some(q)) = (x.in_nelems, y.in_nelems) {
            // An all-to-all's or a p2p pair's sides may send different sizes.
            let sized = !matches!(
                x.kind,
                super::CollKind::AllToAll | super::CollKind::SendRecv
            );
            if sized && p != q {
                return Err("message size");
            }
        }
        if let (Some(p), Some(q)) = (x.dtype_size, y.dtype_size) {
            if p != q {
                return Err("element type");
            }
        }
        // A point-to-point op's Seq counts that rank's p2p calls, not the
        // pair's.
        if let (Some(p), Some(q), false) = (x.seq, y.seq, x.kind == super::CollKind::SendRecv) {
            if p != q {
                return Err("sequence number");
            }
        }
    }
    Ok(())
}

/// The shortest sequence spilled: a page of op indices.
const SPILLED_SEQ: usize = 1024;

/// Collective instances seen on at least two ranks, in issue order per group.
/// When any rank's collectives were spilled to a temporary file, the
/// sequences go to one too (4 bytes a communication op); where one cannot
/// be made they stay held.
pub fn instances(trace: &Trace) -> Instances {
    let spill = trace.collectives_spilled();
    // channel -> (rank index, its op indices in start order, the first's Seq).
    let mut seqs: BTreeMap<String, Members> = BTreeMap::new();
    // Indices fit: ranks and ops are numbered in u32 slots.
    for (ri, t) in (0u32..).zip(&trace.ranks) {
        // The rank's groups by their name's id: a lookup of 4 bytes per op,
        // the names compared once per group.
        // Point-to-point ops (a meta naming a peer) by their channel.
        let mut mine: foldhash::HashMap<Option<super::StrId>, Vec<u32>> = Default::default();
        let mut p2p: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (oi, op) in (0u32..).zip(&t.ops) {
            if op.is_comm() && op.is_kernel() {
                let meta = t.coll_meta(op);
                if meta.is_some_and(|m| m.peer.is_some()) {
                    let c = channel_of(t, op);
                    if c.contains(" p2p ") {
                        p2p.entry(c.into_owned()).or_default().push(oi);
                        continue;
                    }
                }
                mine.entry(meta.and_then(|m| m.pg_name))
                    .or_default()
                    .push(oi);
            }
        }
        let mut named: BTreeMap<String, Vec<u32>> = p2p;
        for (pg, ops) in mine {
            let g = pg.map_or(DEFAULT, |id| t.name(id));
            // Ops naming no group and ops of a group named `default` are one
            // sequence, joined in op order.
            let all = named.entry(g.to_owned()).or_default();
            all.extend(ops);
            all.sort_unstable();
        }
        for (g, ops) in named {
            let first_seq = ops
                .first()
                .and_then(|&o| t.coll_meta(&t.ops[o as usize])?.seq);
            let mut ops = Slab::from(ops);
            // Spilled as each rank's are made, so that the run's are never
            // held at once. A map costs a file and a page: shorter
            // sequences stay held. So does one whose file cannot be made:
            // it is a fourteenth of the collectives' size, and what is
            // computed from it the same.
            if spill && ops.len() >= SPILLED_SEQ {
                let _ = ops.spill();
            }
            seqs.entry(g).or_default().push((ri, ops, first_seq));
        }
    }
    let mut out = Instances::default();
    for (name, ranks) in seqs {
        if ranks.len() < 2 {
            continue;
        }
        let (ranks, mut ops, lead) = resync(trace, &name, ranks);
        // Up to the shortest sequence: a cut-off trace misses the last calls.
        let n = ops.iter().map(|o| o.len()).min().unwrap_or(0);
        let longest = ops.iter().map(|o| o.len()).max().unwrap_or(0);
        for o in &mut ops {
            o.truncate(n);
        }
        // Each member's ops read in blocks, as `Instances::walk` reads. At
        // the first position where the members disagree (kind, size,
        // sequence number) the sequences are out of step (a rank's trace
        // starts or ends mid-iteration, or the ranks issued different
        // calls): everything from there on would pair different calls, so
        // matching stops there, and says so.
        let mut readers = member_readers(trace, &ranks, &ops, WALK_BYTES, MIN_VALUES);
        let mut stopped = None;
        let mut at = Vec::with_capacity(ranks.len());
        'positions: for seq in 0..n {
            at.clear();
            at.extend(
                readers
                    .iter_mut()
                    .map(|(r, seq_of, op_of)| (*r, op_of.get(seq_of.get(seq) as usize))),
            );
            let (r0, first) = &at[0];
            let m0 = trace.ranks[*r0].coll_meta(first);
            for (r, op) in &at[1..] {
                if let Err(what) = agree(first, m0, op, trace.ranks[*r].coll_meta(op)) {
                    stopped = Some((u32::try_from(seq).expect("ops fit in u32"), what));
                    break 'positions;
                }
            }
        }
        drop(readers);
        let n = stopped.map_or(n, |(at, _)| at as usize);
        for o in &mut ops {
            o.truncate(n);
        }
        let seqs = Seqs {
            name: name.into(),
            ranks,
            ops,
            first: out.len,
            longest: u32::try_from(longest).unwrap_or(u32::MAX),
            stopped: stopped.map(|(at, what)| (at, what.into())),
            lead,
        };
        out.len += seqs.positions();
        out.groups.push(seqs);
    }
    out
}

/// Members of one channel as `instances` gathered them: (rank index, op
/// indices, the first op's `Seq`).
type Members = Vec<(u32, Slab<u32>, Option<u64>)>;

/// [`resync`]'s answer: rank indices, their sequences, and each
/// re-synchronised member's (rank number, calls left out).
type Lined = (Vec<u32>, Vec<Slab<u32>>, Vec<(u32, u32)>);

/// Lines the members of a collective channel up by `Seq` when every member
/// records it: a member whose profiler started earlier holds calls the
/// others' traces begin after; those leading calls (`Seq` below the
/// latest first one) are left out, so that position k is the same call on
/// every member. Point-to-point channels are left alone (their `Seq`
/// counts each rank's own p2p calls). Gives the rank indices, the
/// sequences and each re-synchronised member's (rank number, calls left
/// out).
fn resync(trace: &Trace, channel: &str, members: Members) -> Lined {
    let firsts: Option<Vec<u64>> = members.iter().map(|m| m.2).collect();
    let target = firsts
        .filter(|_| !channel.contains(" p2p "))
        .and_then(|f| f.into_iter().max());
    let mut lead = Vec::new();
    let mut ranks = Vec::with_capacity(members.len());
    let mut seqs = Vec::with_capacity(members.len());
    for (ri, ops, first) in members {
        let t = &trace.ranks[ri as usize];
        let ops = match (target, first) {
            (Some(target), Some(first)) if first < target => {
                let spilled = ops.is_spilled();
                let mut v = ops.into_vec();
                let skip = v
                    .iter()
                    .take_while(|&&o| {
                        t.coll_meta(&t.ops[o as usize])
                            .and_then(|m| m.seq)
                            .is_some_and(|s| s < target)
                    })
                    .count();
                v.drain(..skip);
                lead.push((t.rank, u32::try_from(skip).expect("ops fit in u32")));
                let mut s = Slab::from(v);
                if spilled {
                    let _ = s.spill();
                }
                s
            }
            _ => ops,
        };
        ranks.push(ri);
        seqs.push(ops);
    }
    (ranks, seqs, lead)
}

/// What the ranks' collectives disagree on, said once per process group:
/// ranks that list a group's members differently, and positions where the
/// members issued collectives of different kinds (those are not matched).
/// Without these, collectives left out of the matching go unmentioned.
pub fn disagreements(trace: &Trace, inst: &Instances) -> Vec<String> {
    fn list(ranks: &[u32]) -> String {
        let shown: Vec<String> = ranks.iter().take(8).map(u32::to_string).collect();
        let more = if ranks.len() > 8 {
            format!(", ... ({} in all)", ranks.len())
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    }
    let label = |name: &str| {
        if name == DEFAULT {
            "collectives without a process group".to_owned()
        } else if let Some((g, pair)) = name.split_once(" p2p ") {
            format!("point-to-point {pair} in process group {g}")
        } else {
            format!("process group {name}")
        }
    };
    let mut out = Vec::new();
    // Each group's member lists, and the ranks holding each list.
    let mut views: BTreeMap<&str, BTreeMap<&[u32], Vec<u32>>> = BTreeMap::new();
    for t in &trace.ranks {
        for g in t.groups.iter().filter(|g| !g.ranks.is_empty()) {
            let by = views.entry(g.name.as_str()).or_default();
            by.entry(g.ranks.as_slice()).or_default().push(t.rank);
        }
    }
    for (name, by) in views.iter().filter(|(_, by)| by.len() > 1) {
        let said: Vec<String> = by
            .iter()
            .take(3)
            .map(|(members, holders)| format!("{} list {{{}}}", list(holders), list(members)))
            .collect();
        out.push(format!(
            "{}: ranks disagree on its members ({}{}); its calls are matched by position among \
             the ranks that issued them, which may pair different calls",
            label(name),
            said.join("; "),
            if by.len() > 3 { "; ..." } else { "" }
        ));
    }
    for g in &inst.groups {
        // A trace cut short misses a few last calls; more than a twentieth
        // of them (and 16) is ranks that did not issue the same calls.
        let (n, longest) = (g.positions() as u64, u64::from(g.longest));
        if let Some((at, what)) = &g.stopped {
            out.push(format!(
                "{}: the ranks' calls differ in {what} at call {} (of {longest} on the longest \
                 rank), so matching stops there: {}, the rest are not (a rank's trace starts \
                 mid-iteration, or the ranks did not issue the same calls)",
                label(&g.name),
                at + 1,
                match n {
                    0 => "no call is matched".to_owned(),
                    1 => "the call before it is matched by position".to_owned(),
                    n => format!("the {n} calls before it are matched by position"),
                }
            ));
            continue;
        }
        if longest - n > (n / 20).max(16) {
            out.push(format!(
                "{}: its ranks issued {n} to {longest} calls; the last {} of the longer \
                 sequences are not matched (the ranks did not issue the same calls, or a \
                 trace was cut short)",
                label(&g.name),
                longest - n
            ));
        }
    }
    out
}

/// Offsets from per-rank samples of (reference end, rank end) (see `clock::samples`).
pub fn offsets_from(trace: &Trace, samples: &[Vec<(Ns, Ns)>]) -> Vec<Offset> {
    trace
        .ranks
        .iter()
        .zip(samples)
        .map(|(t, s)| offset_of(t.rank, s))
        .collect()
}

/// The offset of `rank` from its samples: their median, and the median
/// deviation from it.
pub fn offset_of(rank: u32, s: &[(Ns, Ns)]) -> Offset {
    if s.is_empty() {
        return Offset {
            rank,
            offset: Ns::ZERO,
            spread: Ns::ZERO,
            samples: 0,
        };
    }
    let d: Vec<Ns> = s.iter().map(|x| x.1).collect();
    let offset = median(d.clone());
    let spread = median(d.iter().map(|&x| (x - offset).abs()).collect());
    Offset {
        rank,
        offset,
        spread,
        samples: d.len(),
    }
}

/// An offset within this of zero leaves a rank's clock alone: its
/// collectives already end together on the raw clocks (ranks sharing a host
/// clock), and moving it would only add the estimate's noise.
const SAME_CLOCK: Ns = Ns(10_000);

/// The most an offset's spread may be and still be applied: a fiftieth of
/// the median step (so that who arrives first within a step survives the
/// shift), within 20 µs and 1 ms.
fn spread_limit(trace: &Trace) -> Ns {
    let steps: Vec<Ns> = trace
        .ranks
        .iter()
        .filter(|t| !t.steps.is_empty())
        .map(|t| median(t.measured_steps().iter().map(|s| s.dur()).collect()))
        .collect();
    if steps.is_empty() {
        return Ns(1_000_000);
    }
    (median(steps) / 50).clamp(Ns(20_000), Ns(1_000_000))
}

/// Which of `offsets` to apply: one resting on shared collectives whose
/// spread is small against the step, and that moves the rank by more than
/// [`SAME_CLOCK`]. The others are set to zero (raw clock). With the reason
/// the clocks are doubtful, when an offset was left out for its spread.
pub fn trusted(trace: &Trace, mut offsets: Vec<Offset>) -> (Vec<Offset>, Option<String>) {
    let limit = spread_limit(trace);
    let mut doubtful = Vec::new();
    for o in offsets.iter_mut().skip(1) {
        if o.samples > 0 && o.spread > limit {
            doubtful.push(format!(
                "rank {} ±{} over {} collectives",
                o.rank,
                super::time::human(o.spread),
                o.samples
            ));
            o.offset = Ns::ZERO;
        } else if o.offset.abs() <= SAME_CLOCK {
            o.offset = Ns::ZERO;
        }
    }
    let doubt = (!doubtful.is_empty()).then(|| {
        let shown: Vec<&str> = doubtful.iter().take(4).map(String::as_str).collect();
        format!(
            "clock offsets too uncertain to apply ({}{}; at most {} against the step): raw \
             clocks kept, so arrival order across ranks is uncertain",
            shown.join(", "),
            if doubtful.len() > 4 { ", ..." } else { "" },
            super::time::human(limit)
        )
    });
    (offsets, doubt)
}

/// Puts every rank on the first rank's clock by `offsets` (as [`trusted`]
/// decided them) when any moves a rank, recording them in `trace.offsets`;
/// leaves the clocks alone otherwise.
pub fn apply(trace: &mut Trace, offsets: Vec<Offset>) {
    if offsets.iter().skip(1).any(|o| o.offset != Ns::ZERO) {
        trace.shift(&offsets);
        trace.offsets = Some(offsets);
    }
}

/// Wait and transfer inside matched collectives, per rank (same order as
/// `Trace::ranks`): a member waits from its start until the last member of the
/// instance has started (clamped to its duration); the rest is transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitSplit {
    pub wait: Ns,
    pub transfer: Ns,
    /// Matched collective ops.
    pub ops: usize,
    /// Wait this rank caused: the others' waits charged to it (see [`Blame`]),
    /// summed over its matched collectives.
    pub caused: Ns,
    /// Matched collectives this rank started last.
    pub last: usize,
}

pub fn wait_split(trace: &Trace, inst: &Instances) -> Vec<WaitSplit> {
    let mut out = vec![WaitSplit::default(); trace.ranks.len()];
    inst.walk(trace, |_, _, members| {
        if let Some((r, o, _)) = latest_of(members) {
            if trace.ranks[r].counts(trace.ranks[r].ops[o].step) {
                out[r].last += 1;
            }
        }
        let blame = Blame::of(members);
        for ((i, m), charged) in members.iter().enumerate().zip(blame.charged()) {
            let (r, o) = (m.r, &m.op);
            // Per-step metrics divide by the measured steps: count only their ops.
            if !trace.ranks[r].counts(o.step) {
                continue;
            }
            let wait = blame.wait(i);
            let s = &mut out[r];
            s.caused += charged;
            s.wait += wait;
            s.transfer += o.dur - wait;
            s.ops += 1;
        }
    });
    out
}

/// The group and position in it of `t`'s op `oi`, when it is a
/// communication kernel (walks the rank's ops before it: for the one op a
/// view asks about).
fn position_of(t: &super::RankTimeline, oi: usize) -> Option<(std::borrow::Cow<'_, str>, usize)> {
    let op = t.ops.get(oi).filter(|op| op.is_comm() && op.is_kernel())?;
    let g = channel_of(t, op);
    let seq = t.ops[..oi]
        .iter()
        .filter(|o| o.is_comm() && o.is_kernel() && channel_of(t, o) == g)
        .count();
    Some((g, seq))
}

/// One value per matched collective, by group and sequence number, and the
/// walk that finds a rank's member ops in it: what per-rank figures are made
/// of, held once per collective rather than once per member. Every rank
/// issuing in a group is a member of each of its collectives: the n-th op a
/// rank issues in a group is in its n-th collective.
#[derive(Debug, Clone, Default)]
pub struct BySeq<T> {
    /// Per group, each position's value ([`Unset::UNSET`]: none).
    by_group: HashMap<Arc<str>, Vec<T>>,
    /// Per channel with any: (rank number, its calls before the instances
    /// begin) (see [`resync`]).
    leads: HashMap<Arc<str>, Vec<(u32, u32)>>,
}

fn leads_of(inst: &Instances) -> HashMap<Arc<str>, Vec<(u32, u32)>> {
    inst.groups
        .iter()
        .filter(|g| !g.lead.is_empty())
        .map(|g| (g.name.clone(), g.lead.clone()))
        .collect()
}

/// A value [`BySeq`] holds, and the one that stands for none there: a
/// collective's value then takes its own size, not an option's (8 bytes a
/// collective for a time, where `Option<Ns>` took 16).
pub trait Unset: Copy + PartialEq {
    const UNSET: Self;
}

/// No op's time is the earliest `Ns`: the builder skips events beyond
/// ±`time::TIME_LIMIT` (2^61 ns), and clock offsets are differences of
/// such times.
impl Unset for Ns {
    const UNSET: Self = Ns::MIN;
}

impl<T: Unset> BySeq<T> {
    /// `value` of each instance (`None`: none for it).
    pub fn of(inst: &Instances, mut value: impl FnMut(Instance<'_>) -> Option<T>) -> Self {
        let mut by_group: HashMap<Arc<str>, Vec<T>> = HashMap::new();
        for i in inst.iter() {
            let seqs = by_group.entry(i.group.clone()).or_default();
            if seqs.len() <= i.seq {
                seqs.resize(i.seq + 1, T::UNSET);
            }
            seqs[i.seq] = value(i).unwrap_or(T::UNSET);
        }
        Self {
            by_group,
            leads: leads_of(inst),
        }
    }

    /// `value` of each instance from its members' ops (read as
    /// [`Instances::walk`] reads them).
    pub fn of_members(
        inst: &Instances,
        trace: &Trace,
        mut value: impl FnMut(Instance<'_>, &[MemberOp]) -> Option<T>,
    ) -> Self {
        let mut by_group: HashMap<Arc<str>, Vec<T>> = HashMap::new();
        let mut seqs: Option<(&Arc<str>, Vec<T>)> = None;
        inst.walk(trace, |_, i, members| {
            // Instances come group by group: one group's values are made
            // before the next's.
            if seqs.as_ref().is_none_or(|s| !Arc::ptr_eq(s.0, i.group)) {
                if let Some((g, v)) = seqs.replace((i.group, Vec::new())) {
                    by_group.insert(g.clone(), v);
                }
            }
            let Some((_, v)) = seqs.as_mut() else {
                return;
            };
            if v.len() <= i.seq {
                v.resize(i.seq + 1, T::UNSET);
            }
            v[i.seq] = value(i, members).unwrap_or(T::UNSET);
        });
        if let Some((g, v)) = seqs {
            by_group.insert(g.clone(), v);
        }
        Self {
            by_group,
            leads: leads_of(inst),
        }
    }

    fn get(&self, group: &str, seq: usize) -> Option<T> {
        let v = *self.by_group.get(group)?.get(seq)?;
        (v != T::UNSET).then_some(v)
    }

    /// Calls `f` with each of `t`'s matched collective ops that has a value,
    /// in op order.
    pub fn walk<'t>(&self, t: &'t super::RankTimeline, mut f: impl FnMut(&'t DeviceOp, T)) {
        let mut next: HashMap<std::borrow::Cow<'t, str>, usize> = HashMap::new();
        for op in t.ops.iter().filter(|op| op.is_comm() && op.is_kernel()) {
            let g = channel_of(t, op);
            let at = *next.get(&g).unwrap_or(&0);
            let lead = self
                .leads
                .get(&*g)
                .and_then(|l| l.iter().find(|l| l.0 == t.rank))
                .map_or(0, |l| l.1 as usize);
            let value = at.checked_sub(lead).and_then(|p| self.get(&g, p));
            *next.entry(g).or_default() += 1;
            if let Some(v) = value {
                f(op, v);
            }
        }
    }
}

/// When the last member of each matched collective started.
pub type LastStarts = BySeq<Ns>;

impl LastStarts {
    pub fn last_starts(trace: &Trace, inst: &Instances) -> Self {
        Self::of_members(inst, trace, |_, members| Some(last_start_of(members)))
    }

    /// The part of each of `t`'s matched collective ops spent waiting for
    /// the last member to start, as (stream, interval), in op order.
    pub fn waits_of(&self, t: &super::RankTimeline) -> Vec<(u32, super::Interval)> {
        let mut out = Vec::new();
        self.walk(t, |op, last| {
            let end = last.clamp(op.start, op.end());
            out.push((op.stream, super::Interval::new(op.start, end)));
        });
        out
    }
}

/// Per rank (like `Trace::ranks`): the part of each matched collective spent
/// waiting for the last member to start, as (stream, interval). (Views make
/// a rank's with [`LastStarts::waits_of`] when they need it.)
#[cfg(test)]
pub fn wait_intervals(trace: &Trace, inst: &Instances) -> Vec<Vec<(u32, super::Interval)>> {
    let last = LastStarts::last_starts(trace, inst);
    trace.ranks.iter().map(|t| last.waits_of(t)).collect()
}

/// Who arrives late at collectives.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arrivals {
    /// Steps as (number, occurrence) (columns of `late`), in order.
    pub steps: Vec<(i64, u32)>,
    /// Per rank (like `Trace::ranks`) and step: the wait the rank caused,
    /// the others' waits charged to it over the step's matched collectives
    /// (as `WaitSplit::caused`); `None` where the rank has no matched
    /// collective in that step.
    pub late: Vec<Vec<Option<Ns>>>,
    /// Per rank: how many matched collectives it was the last to start.
    pub last: Vec<usize>,
    /// Per rank: median of (its start − the median start of the others) over the
    /// collectives it started last.
    pub last_by: Vec<Ns>,
    pub collectives: usize,
}

pub fn arrivals(trace: &Trace, inst: &Instances) -> Arrivals {
    let n = trace.ranks.len();
    let keys: Vec<Vec<(i64, u32)>> = trace.ranks.iter().map(|t| t.step_keys()).collect();
    let mut steps: Vec<(i64, u32)> = keys.iter().flatten().copied().collect();
    steps.sort_unstable_by_key(|&(n, k)| (k, n));
    steps.dedup();
    let mut cell: Vec<Vec<Option<Ns>>> = vec![vec![None; steps.len()]; n];
    let mut last = vec![0; n];
    let mut by: Vec<Vec<Ns>> = vec![Vec::new(); n];
    inst.walk(trace, |_, _, members| {
        let starts: Vec<(usize, Ns)> = members.iter().map(|m| (m.r, m.op.start)).collect();
        let charged = Blame::of(members).charged();
        for (m, &caused) in members.iter().zip(&charged) {
            let r = m.r;
            let Some(key) = m.op.step.get().and_then(|s| keys[r].get(s as usize)) else {
                continue;
            };
            // `steps` is sorted by (occurrence, number): a search, not a
            // scan (a run profiled over thousands of steps has millions of
            // members).
            let Ok(col) = steps.binary_search_by_key(&(key.1, key.0), |&(n, k)| (k, n)) else {
                continue;
            };
            *cell[r][col].get_or_insert(Ns::ZERO) += caused;
        }
        if let Some(&(r, start)) = starts.iter().max_by_key(|s| s.1) {
            let others: Vec<Ns> = starts.iter().filter(|s| s.0 != r).map(|s| s.1).collect();
            if !others.is_empty() {
                last[r] += 1;
                by[r].push(start - median(others));
            }
        }
    });
    Arrivals {
        steps,
        late: cell,
        last,
        last_by: by.into_iter().map(median).collect(),
        collectives: inst.len(),
    }
}

impl Trace {
    /// Shifts every time of each rank by its offset (same order as `ranks`).
    pub fn shift(&mut self, offsets: &[Offset]) {
        for (t, o) in self.ranks.iter_mut().zip(offsets) {
            let d = o.offset;
            if d == Ns::ZERO {
                continue;
            }
            for op in &mut t.ops {
                op.start += d;
                op.launch += d;
            }
            for s in &mut t.steps {
                s.start += d;
                s.end += d;
            }
            for a in std::sync::Arc::make_mut(&mut t.annotations) {
                a.start += d;
                a.end += d;
            }
            for op in t.cpu.iter_mut().flat_map(|th| th.ops.iter_mut()) {
                op.start += d;
            }
            if let Some(w) = &mut t.window {
                w.start += d;
                w.end += d;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::{training_run, RunShape};

    #[test]
    fn the_straggler_arrives_last() {
        // In the sample run rank 5 computes 1.3x slower: it starts every
        // collective last, so its row of the heatmap is the late one.
        let t = trace(&training_run(&RunShape::default()));
        let a = arrivals(&t, &instances(&t));
        assert_eq!(a.steps, vec![(1, 0), (2, 0), (3, 0)]);
        assert_eq!(a.collectives, 51);
        let most = (0..8).max_by_key(|&r| a.last[r]).unwrap();
        assert_eq!(most, 5);
        assert!(a.last[5] >= 40, "{:?}", a.last);
        assert!(a.late[5].iter().all(|l| l.unwrap() > Ns::ZERO));
        assert!(a.last_by[5] > Ns::ZERO);
    }

    /// Four ranks starting one all-reduce at 10, 40, 40 and 25 µs: the
    /// latest is rank index 1 (the lowest of the two at 40), the next-latest
    /// started at 40 too, so it caused no wait; with rank 2 at 35 instead it
    /// caused 5 µs. Two ranks take part in every one, from their sequences.
    #[test]
    fn the_latest_member_by_hand() {
        let c = crate::synth::Coll::all_reduce_f32(1, 4);
        let run = |starts: [f64; 4]| {
            let mut ranks: Vec<_> = (0..4)
                .map(|r| crate::synth::RankTrace::new(Some(r), 4, 10))
                .collect();
            for (r, s) in ranks.iter_mut().zip(starts) {
                r.step(1, 0.0, 100.0);
                r.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", s, 50.0, 20, &c);
            }
            trace(&ranks)
        };
        let t = run([10.0, 40.0, 40.0, 25.0]);
        let inst = instances(&t);
        assert_eq!(inst.len(), 1);
        let i = inst.get(0);
        assert_eq!(i.len(), 4);
        let (r, _, caused) = i.latest(&t).unwrap();
        assert_eq!((r, caused), (1, Ns::ZERO));
        assert_eq!(i.last_start(&t), Ns(40_000));
        let t = run([10.0, 40.0, 35.0, 25.0]);
        let (r, _, caused) = instances(&t).get(0).latest(&t).unwrap();
        assert_eq!((r, caused), (1, Ns(5_000)));
    }

    /// Members of one collective starting at the given µs, each op lasting
    /// the given µs.
    fn members(at: &[(f64, f64)]) -> Vec<MemberOp> {
        at.iter()
            .enumerate()
            .map(|(r, &(start, dur))| MemberOp {
                r,
                o: 0,
                op: DeviceOp::new(
                    crate::model::StrId(0),
                    crate::model::Activity::Kernel,
                    crate::model::KernelClass::Communication,
                    Ns::rounded(start * 1e3),
                    Ns::rounded(dur * 1e3),
                ),
            })
            .collect()
    }

    /// Three members at 0, 10 and 30 µs. Over [0, 10) the first waits while
    /// the other two are absent: 5 µs each. Over [10, 30) the first two
    /// wait for the third: 2 x 20 µs to it. Charged 0, 5, 45: the 50 µs of
    /// waiting (30 + 20) in full. Had the third been on time, the first
    /// would have waited 5 + 20 µs less and the second 20.
    #[test]
    fn blame_by_hand() {
        let b = Blame::of(&members(&[(0.0, 100.0), (10.0, 100.0), (30.0, 100.0)]));
        assert_eq!(b.charged(), [Ns(0), Ns(5_000), Ns(45_000)]);
        assert_eq!(
            b.explained_by(&[false, false, true]),
            [Ns(25_000), Ns(20_000), Ns(0)]
        );
        // The first op lasts 15 µs: it waits 15, not 30. [0, 10): 5 and 5;
        // [10, 15): two waiters, 10 to the third; [15, 30): 15 to it.
        let b = Blame::of(&members(&[(0.0, 15.0), (10.0, 100.0), (30.0, 100.0)]));
        assert_eq!(b.charged(), [Ns(0), Ns(5_000), Ns(30_000)]);
    }

    /// A late pair: ranks 0 and 3 start at 0, ranks 1 and 2 at 164 ms
    /// together. Each early rank waits 164 ms, shared by the two late ones:
    /// 164 ms charged to each, where the last one's margin over the
    /// next-latest is nothing.
    #[test]
    fn a_late_pair_shares_the_blame() {
        let ms = 1e3;
        let b = Blame::of(&members(&[
            (0.0, 200.0 * ms),
            (164.0 * ms, 3.0 * ms),
            (164.0 * ms, 3.0 * ms),
            (0.0, 200.0 * ms),
        ]));
        let c = Ns(164_000_000);
        assert_eq!(b.charged(), [Ns::ZERO, c, c, Ns::ZERO]);
        assert_eq!(
            b.explained_by(&[false, true, true, false]),
            [c, Ns::ZERO, Ns::ZERO, c]
        );
        assert_eq!(
            latest_of(&members(&[(0.0, 1.0), (5.0, 1.0), (5.0, 1.0)]))
                .unwrap()
                .2,
            Ns::ZERO
        );
    }

    /// Offsets are applied only when trusted: rank 1 (spread 2 µs, 50 µs
    /// off) moves; rank 2 (within 10 µs: one host clock) keeps its raw
    /// clock; rank 3 (spread 3 ms against a 100 µs step: limit 20 µs) is
    /// kept raw and makes the clocks doubtful.
    #[test]
    fn only_trusted_offsets_are_applied() {
        let t = trace(&crate::synth::late_pair());
        let o = |rank, offset, spread| Offset {
            rank,
            offset: Ns(offset),
            spread: Ns(spread),
            samples: 10,
        };
        let (got, doubt) = trusted(
            &t,
            vec![
                o(0, 0, 0),
                o(1, 50_000, 2_000),
                o(2, 8_000, 1_000),
                o(3, 7_400_000, 3_000_000),
            ],
        );
        let offsets: Vec<Ns> = got.iter().map(|o| o.offset).collect();
        assert_eq!(offsets, [Ns(0), Ns(50_000), Ns(0), Ns(0)]);
        let doubt = doubt.expect("rank 3 is doubtful");
        assert!(
            doubt.contains("rank 3 ±3.00 ms over 10 collectives"),
            "{doubt}"
        );
        assert!(doubt.contains("at most 20.0 µs"), "{doubt}");
    }

    /// Four ranks on one host, three steps of 1 ms: rank 1 sends to rank 2
    /// (a long transfer, 300 µs), then all four all-reduce at the step's
    /// end. With `Dst Rank` / `Src Rank` recorded, each send pairs with its
    /// recv (2 members) and the all-reduces with each other (4 members):
    /// 3 + 3 instances, every member in its own step. Without them the
    /// send/recv sit in the group's sequence on ranks 1 and 2 only: the
    /// first position already differs in kind, so nothing is matched (and a
    /// finding says so) rather than pairing one step's all-reduce with
    /// another's send.
    fn send_then_all_reduce(peers: bool) -> Trace {
        let c = crate::synth::Coll::all_reduce_f32(1 << 20, 4);
        let ranks: Vec<_> = (0..4u32)
            .map(|r| {
                let mut t = crate::synth::RankTrace::new(Some(r), 4, 10);
                for k in 0..3 {
                    let at = 1000.0 * f64::from(k);
                    t.step(k + 1, at, 1000.0);
                    match r {
                        1 => {
                            t.p2p(true, peers.then_some(2), at + 100.0, 300.0, 4);
                        }
                        2 => {
                            t.p2p(false, peers.then_some(1), at + 100.0, 300.0, 4);
                        }
                        _ => {}
                    }
                    t.collective(
                        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                        at + 500.0,
                        50.0,
                        20,
                        &c,
                    );
                }
                t
            })
            .collect();
        trace(&ranks)
    }

    #[test]
    fn a_send_pairs_with_its_recv() {
        let t = send_then_all_reduce(true);
        let inst = instances(&t);
        assert_eq!(inst.len(), 6);
        let sizes: Vec<usize> = inst.iter().map(|i| i.len()).collect();
        assert_eq!(sizes.iter().filter(|&&n| n == 4).count(), 3);
        assert_eq!(sizes.iter().filter(|&&n| n == 2).count(), 3);
        for i in inst.iter() {
            let steps: Vec<_> = i.member_ops(&t).iter().map(|m| m.op.step).collect();
            assert!(
                steps.iter().all(|s| *s == steps[0]),
                "{}: {steps:?}",
                i.group
            );
            if i.len() == 2 {
                assert_eq!(&**i.group, "0 p2p 1->2");
            }
        }
        assert!(disagreements(&t, &inst).is_empty());
        // Same host: the clocks are left alone.
        let offsets = crate::model::clock::estimate_offsets(&t, &inst);
        let (offsets, doubt) = trusted(&t, offsets);
        assert!(offsets.iter().all(|o| o.offset == Ns::ZERO), "{offsets:?}");
        assert_eq!(doubt, None);
    }

    #[test]
    fn without_peers_matching_stops_where_the_calls_differ() {
        let t = send_then_all_reduce(false);
        let inst = instances(&t);
        assert_eq!(inst.len(), 0);
        let found = disagreements(&t, &inst);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("process group 0: the ranks' calls differ in kind at call 1"),
            "{found:?}"
        );
    }

    /// Two ranks' all-reduces, 100 µs apart, each carrying the `Seq` given.
    fn with_seqs(seqs: [[u64; 3]; 2]) -> Trace {
        let c = crate::synth::Coll::all_reduce_f32(1 << 20, 2);
        let ranks: Vec<_> = (0..2u32)
            .zip(seqs)
            .map(|(r, seqs)| {
                let mut t = crate::synth::RankTrace::new(Some(r), 2, 10);
                for (k, seq) in seqs.into_iter().enumerate() {
                    let at = 100.0 * k as f64;
                    t.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", at, 50.0, 20, &c);
                    t.last_arg("Seq", serde_json::json!(seq));
                }
                t
            })
            .collect();
        trace(&ranks)
    }

    /// Rank 1's profiler started one call later: its all-reduces carry
    /// `Seq` 2, 3, 4 where rank 0's carry 1, 2, 3. Lined up by `Seq`, rank
    /// 0's first call is left out and its calls 2 and 3 pair with rank 1's
    /// first two; by position, every pair would have been one call apart.
    #[test]
    fn calls_are_lined_up_by_sequence_number() {
        let t = with_seqs([[1, 2, 3], [2, 3, 4]]);
        assert_eq!(
            t.ranks[1].colls.iter().map(|m| m.seq).collect::<Vec<_>>(),
            [Some(2), Some(3), Some(4)]
        );
        let inst = instances(&t);
        assert_eq!(inst.len(), 2);
        for i in inst.iter() {
            let seqs: Vec<_> = i
                .pairs()
                .map(|(r, o)| t.ranks[r].coll_meta(&t.ranks[r].ops[o]).unwrap().seq)
                .collect();
            assert_eq!(seqs[0], seqs[1], "{seqs:?}");
        }
        assert_eq!(inst.lead("0", 0), 1);
        assert_eq!(inst.of_op(&t.ranks[0], 0), None);
        assert_eq!(inst.of_op(&t.ranks[0], 1), Some(0));
        assert_eq!(inst.of_op(&t.ranks[1], 0), Some(0));
        // A rank's walk finds the same pairs. Rank 0's calls at 100 and 200
        // µs start last and wait for nothing; rank 1's at 0 and 100 wait
        // for them, at most their 50 µs.
        let w = wait_intervals(&t, &inst);
        let iv = |a, b| crate::model::Interval::new(Ns(a), Ns(b));
        assert_eq!(
            w[0].iter().map(|x| x.1).collect::<Vec<_>>(),
            [iv(100_000, 100_000), iv(200_000, 200_000)]
        );
        assert_eq!(
            w[1].iter().map(|x| x.1).collect::<Vec<_>>(),
            [iv(0, 50_000), iv(100_000, 150_000)]
        );
        assert!(disagreements(&t, &inst).is_empty());
    }

    /// Rank 1 skipped `Seq` 2 (a call it did not issue): at the second
    /// position the members differ in sequence number, and matching stops
    /// after the first call.
    #[test]
    fn a_sequence_number_mismatch_stops_matching() {
        let t = with_seqs([[1, 2, 3], [1, 3, 4]]);
        let inst = instances(&t);
        assert_eq!(inst.len(), 1);
        let found = disagreements(&t, &inst);
        assert!(
            found[0].contains("differ in sequence number at call 2"),
            "{found:?}"
        );
    }

    /// Rank 1's second all-reduce moves bf16 where rank 0's moves fp32: not
    /// one call, so matching stops after the first.
    #[test]
    fn an_element_type_mismatch_stops_matching() {
        let f32 = crate::synth::Coll::all_reduce_f32(1 << 20, 2);
        let bf16 = crate::synth::Coll {
            dtype: "BFloat16",
            ..f32.clone()
        };
        let ranks: Vec<_> = (0..2u32)
            .map(|r| {
                let mut t = crate::synth::RankTrace::new(Some(r), 2, 10);
                for k in 0..3 {
                    let c = if r == 1 && k == 1 { &bf16 } else { &f32 };
                    t.collective(
                        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                        100.0 * f64::from(k),
                        50.0,
                        20,
                        c,
                    );
                }
                t
            })
            .collect();
        let t = trace(&ranks);
        let inst = instances(&t);
        assert_eq!(inst.len(), 1);
        let found = disagreements(&t, &inst);
        assert!(
            found[0].contains("differ in element type at call 2"),
            "{found:?}"
        );
    }

    /// A walk gives each instance's members as its pairs name them, with
    /// their ops, whether the ops are held or spilled, read a value at a
    /// time or in blocks; the passes made of it agree.
    #[test]
    fn a_walk_reads_each_members_op() {
        let held = trace(&training_run(&RunShape::default()));
        let mut spilled = held.clone();
        for t in &mut spilled.ranks {
            t.ops.spill().unwrap();
        }
        let inst = instances(&held);
        assert_eq!(inst, instances(&spilled));
        for t in [&held, &spilled] {
            for (bytes, min) in [(WALK_BYTES, MIN_VALUES), (1, 1), (8 * 60 * 3, 1)] {
                let mut seen = 0;
                inst.walk_in(t, bytes, min, |id, i, members| {
                    assert_eq!(id, seen);
                    assert_eq!(i.seq, inst.get(id).seq);
                    assert_eq!(members, i.member_ops(&held));
                    seen += 1;
                });
                assert_eq!(seen, 51);
            }
        }
        assert_eq!(arrivals(&held, &inst), arrivals(&spilled, &inst),);
        assert_eq!(wait_split(&held, &inst), wait_split(&spilled, &inst));
    }

    /// Every instance's id finds it again, by its group and position.
    #[test]
    fn an_instance_is_found_by_its_group_and_position() {
        let t = trace(&training_run(&RunShape::default()));
        let inst = instances(&t);
        for (id, i) in inst.iter().enumerate() {
            assert_eq!(inst.id_of(i.group, i.seq), Some(id));
        }
        assert_eq!(inst.id_of("no such group", 0), None);
    }

    #[test]
    fn lateness_by_hand() {
        // `late_pair`: rank 1 starts the all-reduce 30 µs after rank 0.
        let t = trace(&crate::synth::late_pair());
        let a = arrivals(&t, &instances(&t));
        assert_eq!(a.late, vec![vec![Some(Ns::ZERO)], vec![Some(Ns(30_000))]]);
        assert_eq!(a.last, vec![0, 1]);
        assert_eq!(a.last_by, vec![Ns::ZERO, Ns(30_000)]);
    }

    #[test]
    fn wait_is_until_the_last_member_starts() {
        let t = trace(&crate::synth::late_pair());
        let w = wait_split(&t, &instances(&t));
        let split = |wait, transfer| WaitSplit {
            wait,
            transfer,
            ops: 1,
            ..Default::default()
        };
        // Rank 1 started 30 µs late: it caused rank 0's 30 µs wait.
        let late = WaitSplit {
            caused: Ns(30_000),
            last: 1,
            ..split(Ns::ZERO, Ns(20_000))
        };
        assert_eq!(w, vec![split(Ns(30_000), Ns(20_000)), late]);
    }

    /// A rank's waits, found by walking its ops, are those of its members
    /// of each matched collective: here 8 ranks and 51 collectives.
    #[test]
    fn waits_by_walk_are_the_members_waits() {
        let t = trace(&training_run(&RunShape::default()));
        let inst = instances(&t);
        let mut by_member = vec![Vec::new(); t.ranks.len()];
        for i in inst.iter() {
            let last = i.last_start(&t);
            for (r, o) in i.pairs() {
                let op = &t.ranks[r].ops[o];
                let end = last.clamp(op.start, op.end());
                by_member[r].push((op.stream, crate::model::Interval::new(op.start, end)));
            }
        }
        for w in &mut by_member {
            w.sort_by_key(|x| x.1.start);
        }
        assert_eq!(by_member[0].len(), 51);
        assert_eq!(wait_intervals(&t, &inst), by_member);
    }

    /// The n-th op of a group is in its n-th collective: a third all-reduce
    /// on rank 0 alone (rank 1's trace cut off) waits for nothing.
    #[test]
    fn an_unmatched_op_has_no_wait() {
        let mut ranks = crate::synth::late_pair();
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        ranks[0].collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 70.0, 5.0, 20, &c);
        let t = trace(&ranks);
        let inst = instances(&t);
        assert_eq!(inst.len(), 1);
        let w = wait_intervals(&t, &inst);
        // Rank 0 waited from 10 µs until rank 1 started at 40 µs; rank 1 none.
        let iv = |a, b| crate::model::Interval::new(Ns(a), Ns(b));
        assert_eq!(
            w[0].iter().map(|x| x.1).collect::<Vec<_>>(),
            [iv(10_000, 40_000)]
        );
        assert_eq!(
            w[1].iter().map(|x| x.1).collect::<Vec<_>>(),
            [iv(40_000, 40_000)]
        );
    }
}
