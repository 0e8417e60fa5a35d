//! Matching one collective across the ranks that took part in it, and clock
//! alignment from those matches. The n-th collective a rank issues in a process
//! group is the n-th every other member issues in it (NCCL requires this order),
//! and a collective ends on all members at nearly the same moment.

use std::collections::BTreeMap;

// Keyed by group names and looked up once per communication op: foldhash
// (randomly seeded, as SipHash is) costs a fraction of SipHash on such keys.
use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use super::slab::{Reader, Slab, Spill};
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
    pub fn walk_in<'s>(
        &'s self,
        trace: &Trace,
        bytes: usize,
        min: usize,
        mut f: impl FnMut(usize, Instance<'s>, &[MemberOp]),
    ) {
        for seqs in &self.groups {
            let readers = member_readers(trace, &seqs.ranks, &seqs.ops, bytes, min);
            let mut gather = Gather::new(readers, seqs.positions(), bytes);
            for seq in 0..seqs.positions() {
                let i = Instance {
                    group: &seqs.name,
                    seq,
                    seqs,
                };
                f(seqs.first + seq, i, gather.at(seq));
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
pub const WALK_BYTES: usize = 4 << 20;
pub const MIN_VALUES: usize = 256;

type MemberReaders<'a> = Vec<(usize, Reader<'a, u32>, Reader<'a, DeviceOp>)>;

/// Each member's rank index (`ranks[k]`) with readers of its sequence
/// (`ops[k]`) and of its rank's ops, reading as many of each a block:
/// `bytes` over the members, at least `min` each.
fn member_readers<'a>(
    trace: &'a Trace,
    ranks: &[u32],
    ops: &'a [Slab<u32>],
    bytes: usize,
    min: usize,
) -> MemberReaders<'a> {
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

/// The bytes of members' ops gathered at a time (see [`Gather`]): well
/// inside a core's L2 cache.
const GATHER_BYTES: usize = 256 << 10;
/// The most positions gathered at a time.
const GATHER_POSITIONS: usize = 64;

/// Each position's members, gathered a few positions at a time one member
/// after another. Read position by position, a collective's members lie in
/// as many places as it has members, each a cache miss on a large run (a
/// fifth of a summary's first open was spent waiting on them); read member
/// by member, each member's next ops lie side by side, and the processor
/// fetches them ahead.
struct Gather<'a> {
    readers: MemberReaders<'a>,
    /// `block[s * members + k]`: member `k` at position `from + s`.
    block: Vec<MemberOp>,
    from: usize,
    held: usize,
    /// Positions in the sequences, and gathered at a time.
    positions: usize,
    per_block: usize,
}

impl<'a> Gather<'a> {
    /// At most `bytes` (and [`GATHER_BYTES`]) of members at a time.
    fn new(readers: MemberReaders<'a>, positions: usize, bytes: usize) -> Self {
        let per_position = readers.len().max(1) * std::mem::size_of::<MemberOp>();
        Self {
            readers,
            block: Vec::new(),
            from: 0,
            held: 0,
            positions,
            per_block: (bytes.min(GATHER_BYTES) / per_position).clamp(1, GATHER_POSITIONS),
        }
    }

    /// The members at position `seq` (below `positions`), in the readers'
    /// order. Cheapest at rising positions.
    fn at(&mut self, seq: usize) -> &[MemberOp] {
        let m = self.readers.len();
        if !(self.from..self.from + self.held).contains(&seq) {
            let n = self.per_block.min(self.positions - seq);
            for (k, (r, seq_of, op_of)) in self.readers.iter_mut().enumerate() {
                for s in 0..n {
                    let o = seq_of.get(seq + s) as usize;
                    let member = MemberOp {
                        r: *r,
                        o,
                        op: op_of.get(o),
                    };
                    let at = s * m + k;
                    // Grown once, by the first block; places not yet
                    // written hold copies until their member's turn.
                    if at >= self.block.len() {
                        self.block.resize(at + 1, member.clone());
                    }
                    self.block[at] = member;
                }
            }
            self.from = seq;
            self.held = n;
        }
        let s = seq - self.from;
        &self.block[s * m..(s + 1) * m]
    }
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
pub(crate) fn last_start_of(members: &[MemberOp]) -> Ns {
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
    pub(crate) fn of_waits(members: Vec<(Ns, Ns)>) -> Self {
        let mut starts: Vec<Ns> = members.iter().map(|m| m.0).collect();
        let mut ends: Vec<Ns> = members.iter().map(|m| m.0 + m.1).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        // A sort of both (a network for a few dozen) costs fewer
        // instructions than merging the two sorted lists.
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
    pub(crate) fn wait(&self, i: usize) -> Ns {
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
        // Arrived by p, and of them those whose wait ended by p: counts
        // that only grow as p does.
        let (mut arrived, mut done) = (0, 0);
        for w in self.points.windows(2) {
            let (p, q) = (w[0], w[1]);
            arrived += self.starts[arrived..]
                .iter()
                .take_while(|&&s| s <= p)
                .count();
            done += self.ends[done..].iter().take_while(|&&e| e <= p).count();
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

    /// [`Blame::charged`] of member `i` alone.
    pub fn charged_to(&self, i: usize) -> Ns {
        let cum = self.cumulative(|len, waiting, absent, _| len * waiting / absent);
        Ns::rounded(cum[self.at(self.members[i].0)])
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
    pub fn last_start(&self, trace: &Trace) -> Ns {
        last_start_of(&self.member_ops(trace))
    }

    /// The member that started last and the wait it caused (see
    /// [`latest_of`]).
    pub fn latest(&self, trace: &Trace) -> Option<(usize, usize, Ns)> {
        latest_of(&self.member_ops(trace))
    }
}

pub use super::figures::Figures;

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
pub(crate) fn channel_of<'t>(
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
    let spill = trace.spilled_to();
    let per_rank = (0..trace.ranks.len())
        .map(|ri| sequences_of(trace, ri, spill))
        .collect();
    instances_of(trace, per_rank)
}

/// One rank's communication kernels by the channel they are matched in (see
/// [`channel_of`]): (channel, op indices in start order, the first's `Seq`),
/// by channel. Made for each rank on its own, so that callers can make them
/// side by side, then [`instances_of`] matches them.
pub struct RankSequences(Vec<(String, Slab<u32>, Option<u64>)>);

/// Rank index `ri`'s sequences, spilled to `spill` (see
/// [`Trace::spilled_to`]) when long.
pub fn sequences_of(trace: &Trace, ri: usize, spill: Option<&dyn Spill>) -> RankSequences {
    let t = &trace.ranks[ri];
    // The rank's groups by their name's id: a lookup of 4 bytes per op,
    // the names compared once per group.
    // Point-to-point ops (a meta naming a peer) by their channel.
    let mut mine: foldhash::HashMap<Option<super::StrId>, Vec<u32>> = Default::default();
    let mut p2p: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    // Indices fit: ops are numbered in u32 slots.
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
    let named = named.into_iter().map(|(g, ops)| {
        let first_seq = ops
            .first()
            .and_then(|&o| t.coll_meta(&t.ops[o as usize])?.seq);
        let mut ops = Slab::from(ops);
        // Spilled as each rank's are made, so that the run's are never
        // held at once. A map costs a file and a page: shorter
        // sequences stay held. So does one whose file cannot be made:
        // it is a fourteenth of the collectives' size, and what is
        // computed from it the same.
        if let Some(to) = spill.filter(|_| ops.len() >= SPILLED_SEQ) {
            let _ = ops.spill(to);
        }
        (g, ops, first_seq)
    });
    RankSequences(named.collect())
}

/// The collectives matched across ranks from each rank's sequences
/// (`per_rank[ri]`: rank index `ri`'s, see [`sequences_of`]).
pub fn instances_of(trace: &Trace, per_rank: Vec<RankSequences>) -> Instances {
    // channel -> (rank index, its op indices in start order, the first's Seq).
    let mut seqs: BTreeMap<String, Members> = BTreeMap::new();
    // Indices fit: ranks are numbered in u32 slots.
    for (ri, RankSequences(named)) in (0u32..).zip(per_rank) {
        for (g, ops, first_seq) in named {
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
        let readers = member_readers(trace, &ranks, &ops, WALK_BYTES, MIN_VALUES);
        let mut gather = Gather::new(readers, n, WALK_BYTES);
        let mut stopped = None;
        'positions: for seq in 0..n {
            let at = gather.at(seq);
            let first = &at[0];
            let m0 = trace.ranks[first.r].coll_meta(&first.op);
            for m in &at[1..] {
                if let Err(what) = agree(&first.op, m0, &m.op, trace.ranks[m.r].coll_meta(&m.op)) {
                    stopped = Some((u32::try_from(seq).expect("ops fit in u32"), what));
                    break 'positions;
                }
            }
        }
        drop(gather);
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
                let spilled = ops.spilled_to();
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
                if let Some(to) = spilled {
                    let _ = s.spill(to);
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
pub(crate) fn offsets_from(trace: &Trace, samples: &[Vec<(Ns, Ns)>]) -> Vec<Offset> {
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
    pub(crate) fn of(inst: &Instances, mut value: impl FnMut(Instance<'_>) -> Option<T>) -> Self {
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
    pub(crate) fn of_members(
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

    /// Calls `f` with each of `t`'s matched collective ops that has a value,
    /// in op order.
    pub(crate) fn walk<'t>(&self, t: &'t super::RankTimeline, mut f: impl FnMut(&'t DeviceOp, T)) {
        // Per channel: the rank's calls in it so far, the calls it made
        // before the others' traces begin, and the channel's values. An
        // op's channel follows from its collective record, so each record's
        // is found once (a rank has a few records and thousands of ops).
        type Channel<'a, T> = (usize, usize, Option<&'a [T]>);
        let mut channels: Vec<Channel<'_, T>> = Vec::new();
        let mut named: HashMap<std::borrow::Cow<'t, str>, usize> = HashMap::new();
        // By record, and for ops without one (the last place).
        let mut of_record = vec![usize::MAX; t.colls.len() + 1];
        for op in t.ops.iter().filter(|op| op.is_comm() && op.is_kernel()) {
            let record = (op.meta.get().map(|m| m as usize))
                .filter(|&m| m < t.colls.len())
                .unwrap_or(t.colls.len());
            if of_record[record] == usize::MAX {
                let n = channels.len();
                of_record[record] = *named.entry(channel_of(t, op)).or_insert_with_key(|g| {
                    let lead = (self.leads.get(&**g))
                        .and_then(|l| l.iter().find(|l| l.0 == t.rank))
                        .map_or(0, |l| l.1 as usize);
                    channels.push((0, lead, self.by_group.get(&**g).map(Vec::as_slice)));
                    n
                });
            }
            let (at, lead, values) = &mut channels[of_record[record]];
            let value = (at.checked_sub(*lead))
                .and_then(|p| (*values)?.get(p).copied())
                .filter(|&v| v != T::UNSET);
            *at += 1;
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

    /// [`LastStarts::last_starts`] from each instance's last start found
    /// already (`start_of` its id; `None`: none), without a walk over the
    /// members.
    pub fn from_ids(inst: &Instances, mut start_of: impl FnMut(usize) -> Option<Ns>) -> Self {
        // `of` visits the instances in id order.
        let mut id = 0;
        Self::of(inst, |_| {
            id += 1;
            start_of(id - 1)
        })
    }

    /// Calls `f` with each of `t`'s matched collective ops and its wait for
    /// the last member to start (clamped to the op), in op order: a member's
    /// wait as `Instances::walk` makes it, from the rank's ops alone.
    pub fn each_wait<'t>(&self, t: &'t super::RankTimeline, mut f: impl FnMut(&'t DeviceOp, Ns)) {
        self.walk(t, |op, last| {
            f(op, (last - op.start).clamp(Ns::ZERO, op.dur))
        });
    }

    /// The part of each of `t`'s matched collective ops spent waiting for
    /// the last member to start, as (stream, interval), in op order.
    pub fn waits_of(&self, t: &super::RankTimeline) -> Vec<(u32, super::Interval)> {
        // At most one per communication kernel, counted first: grown by
        // doubling, a rank's 69,000 were copied over and over (1.3 % of a
        // first open of 64 ranks of collectives).
        let comm = t.ops.iter().filter(|op| op.is_comm() && op.is_kernel());
        let mut out = Vec::with_capacity(comm.count());
        self.each_wait(t, |op, wait| {
            out.push((op.stream, super::Interval::new(op.start, op.start + wait)));
        });
        out
    }
}

/// Per rank (like `Trace::ranks`): the part of each matched collective spent
/// waiting for the last member to start, as (stream, interval). (Views make
/// a rank's with [`LastStarts::waits_of`] when they need it.)
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
            if let Some(e) = &mut t.epoch {
                *e -= d;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The wait charged to each member as its definition says it, point by
    /// point: over each stretch between two successive points, counting
    /// the members arrived and still waiting afresh.
    fn charged_plainly(members: &[(Ns, Ns)]) -> Vec<Ns> {
        let mut points: Vec<Ns> = members.iter().flat_map(|&(s, w)| [s, s + w]).collect();
        points.sort_unstable();
        points.dedup();
        let n = members.len();
        let mut cum = vec![0.0];
        for w in points.windows(2) {
            let (p, q) = (w[0], w[1]);
            let arrived = members.iter().filter(|m| m.0 <= p).count();
            let done = members.iter().filter(|m| m.0 + m.1 <= p).count();
            let (waiting, absent) = (arrived - done, n - arrived);
            let add = if waiting > 0 && absent > 0 {
                (q - p).as_f64() * waiting as f64 / absent as f64
            } else {
                0.0
            };
            cum.push(cum.last().unwrap() + add);
        }
        members
            .iter()
            .map(|&(s, _)| Ns::rounded(cum[points.partition_point(|&p| p < s)]))
            .collect()
    }

    proptest! {
        /// Ties (members starting together, waits ending where another
        /// starts) are the cases the counts carried from point to point
        /// must get right.
        #[test]
        fn blame_counts_as_its_definition(
            members in prop::collection::vec((0i64..40, 0i64..40), 1..12)
        ) {
            let members: Vec<(Ns, Ns)> = members.into_iter().map(|(s, w)| (Ns(s), Ns(w))).collect();
            let b = Blame::of_waits(members.clone());
            let want = charged_plainly(&members);
            prop_assert_eq!(b.charged(), want.clone());
            for (i, w) in want.into_iter().enumerate() {
                prop_assert_eq!(b.charged_to(i), w);
            }
        }
    }
}
