//! Each collective matched across ranks as one row: when its members arrived,
//! how long the early ones waited for the last, how long the transfer took
//! once all were there and the bandwidth that implies; and the same grouped
//! by (kind, size, group). Barrier model: a collective's transfer starts when
//! its last member starts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::groups::GroupInfo;
use crate::model::collectives::{latest_of, Blame, Figures, Instances, LastStarts, MemberOp};
use crate::model::slab::{Slab, Spill};
use crate::model::{CollKind, DeviceOp, Ns, Trace};

/// One member of a matched collective (one per rank and collective: kept
/// small, a run holds millions).
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub rank: u32,
    /// Index of its rank in `Trace::ranks`.
    pub index: u32,
    /// Index of the op in its rank's `ops`.
    pub op: u32,
    pub start: Ns,
    /// From its start until the last member started, clamped to the op.
    pub wait: Ns,
    /// The rest of the op: duration − wait.
    pub transfer: Ns,
    /// Its op's step (see `DeviceOp::step`), so that a pass need not read
    /// the op again to know whether it counts.
    pub step: crate::model::Slot,
    /// Its op's kernel name (in its rank's names).
    pub name: crate::model::StrId,
}

impl Member {
    pub fn end(&self) -> Ns {
        self.start + self.wait + self.transfer
    }

    /// Its step's number, when launched in one.
    pub fn step(&self, trace: &Trace) -> Option<i64> {
        let t = &trace.ranks[self.index as usize];
        self.step.get().map(|s| t.steps[s as usize].number)
    }

    /// Its rank's timeline and op.
    pub fn of<'t>(&self, trace: &'t Trace) -> (&'t crate::model::RankTimeline, &'t DeviceOp) {
        let t = &trace.ranks[self.index as usize];
        (t, &t.ops[self.op as usize])
    }
}

/// One collective instance, over its members. Its members are not held
/// (a run has one per communication op): [`InstanceRow::members`] makes them
/// from its [`Instance`] and the ops. Rows are held as plain figures in
/// [`Rows`], which makes this view of one when it is read.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceRow<'a> {
    /// Index in the trace's matched instances.
    pub id: usize,
    pub group: &'a str,
    /// The group's role (tp, dp, ...), where it could be inferred.
    pub role: Option<super::groups::Role>,
    pub seq: usize,
    pub kind: Option<CollKind>,
    /// The kernel name of the first member.
    pub name: &'a str,
    /// Message bytes (`In msg nelems` × element size) of the first member
    /// that records them.
    pub bytes: Option<u64>,
    /// nccl-tests' S, from which algorithm bandwidth is computed: the
    /// gathered output for all-gather, the message otherwise.
    pub data_bytes: Option<u64>,
    /// How many members it has.
    pub size: u32,
    /// The member that started last, and how long after the next-latest.
    pub last_rank: u32,
    pub last_by: Ns,
    /// When the last member started: the others wait until then.
    pub last_start: Ns,
    /// The wait the last member caused: the others' waits charged to it
    /// (see `model::collectives::Blame`).
    pub caused: Ns,
    /// Summed wait of all members.
    pub wait: Ns,
    /// Transfer once every member is there: the last starter's duration.
    pub transfer: Ns,
    /// Earliest start and latest end over the members.
    pub start: Ns,
    pub end: Ns,
}

impl<'a> InstanceRow<'a> {
    /// Its group's role, or `group NAME` (see [`super::groups::label`]).
    pub fn label(&self) -> String {
        super::groups::label(self.role, self.group)
    }

    /// Algorithm bandwidth, bytes/s: S / transfer.
    pub fn algbw(&self) -> Option<f64> {
        let s = self.data_bytes? as f64;
        (self.transfer > Ns::ZERO).then(|| s * 1e9 / self.transfer.as_f64())
    }

    /// Bus bandwidth, bytes/s: algbw × nccl-tests' factor for the kind and group size.
    pub fn busbw(&self) -> Option<f64> {
        Some(self.algbw()? * self.kind?.bus_factor(self.size)?)
    }

    /// Its members, in the order of its instance (`inst` is the trace's
    /// matched instances, which this row is `id` of).
    pub fn members<'t>(
        &self,
        trace: &'t Trace,
        inst: &'t Instances,
    ) -> impl ExactSizeIterator<Item = Member> + 't {
        let last_start = self.last_start;
        inst.get(self.id)
            .pairs()
            .map(move |(r, o)| Member::new(trace, r, o, last_start))
    }
}

impl Member {
    /// The member op `o` of rank index `r`, in a collective whose last
    /// member started at `last_start`.
    fn new(trace: &Trace, r: usize, o: usize, last_start: Ns) -> Self {
        let op = trace.ranks[r].ops[o].clone();
        Self::from_op(trace, &MemberOp { r, o, op }, last_start)
    }

    /// The member `m`, in a collective whose last member started at
    /// `last_start`.
    pub(crate) fn from_op(trace: &Trace, m: &MemberOp, last_start: Ns) -> Self {
        let op = &m.op;
        let wait = (last_start - op.start).clamp(Ns::ZERO, op.dur);
        Member {
            rank: trace.ranks[m.r].rank,
            // Indices fit: ranks and ops are numbered in u32 slots.
            index: m.r as u32,
            op: m.o as u32,
            start: op.start,
            wait,
            transfer: op.dur - wait,
            step: op.step,
            name: op.name,
        }
    }
}

/// Every matched collective's row, in instance order: plain figures (104
/// bytes each) held in memory or, when the run's collectives are, spilled
/// to a temporary file with them (see `model::slab`), plus the group and
/// kernel names they index (a handful).
#[derive(Debug, Clone)]
pub struct Rows {
    /// In chunks of [`ROWS_PER_CHUNK`], each spilled as it is made, so that
    /// a run's are never all held at once.
    chunks: Vec<Slab<Figures>>,
    per_chunk: usize,
    len: usize,
    /// By `Figures::group`: the group's name and role.
    groups: Vec<(Arc<str>, Option<super::groups::Role>)>,
    /// By `Figures::name`.
    names: Vec<Arc<str>>,
}

/// Rows a chunk of [`Rows`] holds: 6.8 MB of figures.
const ROWS_PER_CHUNK: usize = 1 << 16;

impl Default for Rows {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            per_chunk: ROWS_PER_CHUNK,
            len: 0,
            groups: Vec::new(),
            names: Vec::new(),
        }
    }
}

impl Rows {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// When the last member of each of `inst`'s instances (those the rows
    /// were made of) started: every instance has a row (it has two members
    /// at least), so this is `LastStarts::last_starts` without a second
    /// walk over the members.
    pub(crate) fn last_starts(&self, inst: &Instances) -> LastStarts {
        let mut by_id = vec![None; inst.len()];
        for i in 0..self.len() {
            let r = self.get(i);
            by_id[r.id] = Some(r.last_start);
        }
        LastStarts::from_ids(inst, |id| by_id[id])
    }

    /// Row `i` (panics past the end, as indexing does).
    pub fn get(&self, i: usize) -> InstanceRow<'_> {
        let f = &self.chunks[i / self.per_chunk][i % self.per_chunk];
        let (group, role) = &self.groups[f.group as usize];
        let known = |bit: u8, v: u64| (f.sized & bit != 0).then_some(v);
        InstanceRow {
            id: f.id as usize,
            group,
            role: *role,
            seq: f.seq as usize,
            kind: f.kind,
            name: &self.names[f.name as usize],
            bytes: known(1, f.bytes),
            data_bytes: known(2, f.data_bytes),
            size: f.size,
            last_rank: f.last_rank,
            last_by: f.last_by,
            last_start: f.last_start,
            caused: f.caused,
            wait: f.wait,
            transfer: f.transfer,
            start: f.start,
            end: f.end,
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = InstanceRow<'_>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    pub fn to_vec(&self) -> Vec<InstanceRow<'_>> {
        self.iter().collect()
    }

    /// Whether every row is in a temporary file (none: not spilled).
    #[cfg(test)]
    pub(crate) fn is_spilled(&self) -> bool {
        !self.chunks.is_empty() && self.chunks.iter().all(Slab::is_spilled)
    }

    /// Adds `chunk` (a full one, or the last), spilled when `spill` says
    /// so; held where its file cannot be made (the rows read the same).
    fn push_chunk(&mut self, mut chunk: Vec<Figures>, spill: Option<&dyn Spill>) {
        self.len += chunk.len();
        chunk.shrink_to_fit();
        let mut chunk = Slab::from(chunk);
        if let Some(to) = spill {
            let _ = chunk.spill(to);
        }
        self.chunks.push(chunk);
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = InstanceRow<'a>;
    type IntoIter = Box<dyn ExactSizeIterator<Item = InstanceRow<'a>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// Calls `f` with each of `rows` (those of `inst`, the instances of
/// `trace`) and its members, in order, the members read as
/// [`Instances::walk`] reads them: a pass over every member of every
/// collective reads collectives on disk in blocks.
pub(crate) fn with_members<'r>(
    trace: &Trace,
    inst: &Instances,
    rows: &'r Rows,
    mut f: impl FnMut(&InstanceRow<'r>, &[Member]),
) {
    let mut at = 0;
    let mut members: Vec<Member> = Vec::new();
    inst.walk(trace, |id, _, ops| {
        // Rows are in instance order, one per instance at most.
        while at < rows.len() && rows.get(at).id < id {
            at += 1;
        }
        if at == rows.len() {
            return;
        }
        let row = rows.get(at);
        if row.id != id {
            return;
        }
        members.clear();
        members.extend(
            ops.iter()
                .map(|m| Member::from_op(trace, m, row.last_start)),
        );
        f(&row, &members);
    });
}

/// Rows for `inst` (the instances of `trace`, in `groups`), in instance
/// order; spilled to a temporary file when any rank's collectives are
/// (held where one cannot be made: the results are the same).
pub(crate) fn rows(trace: &Trace, inst: &Instances, groups: &[GroupInfo]) -> Rows {
    rows_in_chunks(trace, inst, groups, ROWS_PER_CHUNK)
}

/// [`rows`] in chunks of `per_chunk` (for tests: a few rows a chunk).
fn rows_in_chunks(trace: &Trace, inst: &Instances, groups: &[GroupInfo], per_chunk: usize) -> Rows {
    // Each group and kernel name once, for all the rows that show it.
    let mut group_ids: HashMap<&str, u32> = HashMap::new();
    let mut name_ids: HashMap<&str, u32> = HashMap::new();
    let spill = trace.spilled_to();
    let mut out = Rows {
        per_chunk,
        ..Rows::default()
    };
    let mut figures: Vec<Figures> = Vec::with_capacity(inst.len().min(per_chunk));
    // Ids and counts fit: instances, ranks and ops are numbered in u32 slots.
    let id_of = |n: usize| u32::try_from(n).expect("fits in u32");
    inst.walk(trace, |id, i, members| {
        let Some((lr, lo, last_by)) = latest_of(members) else {
            return;
        };
        let Some(latest) = members.iter().find(|m| (m.r, m.o) == (lr, lo)) else {
            return;
        };
        let (last_start, transfer) = (latest.op.start, latest.op.dur);
        let (mut wait, mut start, mut end) = (Ns::ZERO, Ns::MAX, Ns::MIN);
        for mo in members {
            let m = Member::from_op(trace, mo, last_start);
            wait += m.wait;
            start = start.min(m.start);
            end = end.max(m.end());
        }
        // The others' waits charged to the last member (see `Blame`).
        let caused = members
            .iter()
            .position(|m| (m.r, m.o) == (lr, lo))
            .map_or(Ns::ZERO, |k| Blame::of(members).charged_to(k));
        let Some(m0) = members.first() else {
            return;
        };
        let first = &trace.ranks[m0.r];
        let sized = members.iter().find_map(|m| {
            let meta = trace.ranks[m.r].coll_meta(&m.op)?;
            Some((meta.in_bytes()?, meta.out_bytes()))
        });
        let kind = m0.op.coll;
        let data_bytes = sized.and_then(|(inb, out)| match kind {
            Some(CollKind::AllGather) => out,
            _ => Some(inb),
        });
        let group = *group_ids.entry(&**i.group).or_insert_with(|| {
            let role = groups
                .iter()
                .find(|g| *g.name == *crate::model::collectives::group_of_channel(i.group))
                .and_then(|g| g.role)
                .map(|r| r.0);
            out.groups.push((i.group.clone(), role));
            id_of(out.groups.len() - 1)
        });
        let name = first.name(m0.op.name);
        let name = *name_ids.entry(name).or_insert_with(|| {
            out.names.push(name.into());
            id_of(out.names.len() - 1)
        });
        let bytes = sized.map(|s| s.0);
        figures.push(Figures {
            last_by,
            last_start,
            caused,
            wait,
            transfer,
            start,
            end,
            bytes: bytes.unwrap_or(0),
            data_bytes: data_bytes.unwrap_or(0),
            id: id_of(id),
            group,
            seq: id_of(i.seq),
            name,
            size: u32::try_from(i.len()).unwrap_or(u32::MAX),
            last_rank: trace.ranks[lr].rank,
            kind,
            sized: u8::from(bytes.is_some()) | u8::from(data_bytes.is_some()) << 1,
            pad: [0; 6],
        });
        if figures.len() == per_chunk {
            out.push_chunk(std::mem::take(&mut figures), spill);
            figures.reserve(per_chunk);
        }
    });
    if !figures.is_empty() {
        out.push_chunk(figures, spill);
    }
    out
}

/// Instances of one (kind, message size, group, group size).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRow {
    pub kind: Option<CollKind>,
    pub bytes: Option<u64>,
    pub group: String,
    pub role: Option<super::groups::Role>,
    pub size: usize,
    pub count: usize,
    pub transfer_p50: Ns,
    pub transfer_p95: Ns,
    /// Σ S × factor / Σ transfer, bytes/s, over the instances with a size.
    pub busbw: Option<f64>,
    /// Summed wait of every member of every instance.
    pub wait: Ns,
    /// The rank whose late arrivals caused the most wait here, and how much.
    pub culprit: Option<(u32, Ns)>,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[Ns], p: f64) -> Ns {
    if sorted.is_empty() {
        return Ns::ZERO;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `rows` grouped by (kind, size, group, group size), most wait first.
pub fn grouped<'a>(rows: impl IntoIterator<Item = InstanceRow<'a>>) -> Vec<GroupRow> {
    type Key<'a> = (Option<&'static str>, Option<u64>, &'a str, u32);
    /// What a group's rows add up to (a transfer time per row, for the
    /// percentiles; the rows themselves are not kept).
    struct Sums {
        first: (Option<CollKind>, Option<super::groups::Role>),
        transfers: Vec<Ns>,
        moved: f64,
        time: f64,
        blame: BTreeMap<u32, Ns>,
        wait: Ns,
    }
    let mut by: BTreeMap<Key<'a>, Sums> = BTreeMap::new();
    for r in rows {
        let key = (r.kind.map(|k| k.name()), r.bytes, r.group, r.size);
        let s = by.entry(key).or_insert_with(|| Sums {
            first: (r.kind, r.role),
            transfers: Vec::new(),
            moved: 0.0,
            time: 0.0,
            blame: BTreeMap::new(),
            wait: Ns::ZERO,
        });
        s.transfers.push(r.transfer);
        if let (Some(bw), true) = (r.busbw(), r.transfer > Ns::ZERO) {
            let secs = r.transfer.as_f64() / 1e9;
            s.moved += bw * secs;
            s.time += secs;
        }
        *s.blame.entry(r.last_rank).or_default() += r.caused;
        s.wait += r.wait;
    }
    let mut out: Vec<GroupRow> = by
        .into_iter()
        .map(|((_, bytes, group, size), mut s)| {
            s.transfers.sort_unstable();
            let culprit = s
                .blame
                .into_iter()
                .filter(|&(_, c)| c > Ns::ZERO)
                .max_by_key(|&(rank, c)| (c, std::cmp::Reverse(rank)));
            GroupRow {
                kind: s.first.0,
                bytes,
                group: group.to_owned(),
                role: s.first.1,
                size: size as usize,
                count: s.transfers.len(),
                transfer_p50: percentile(&s.transfers, 50.0),
                transfer_p95: percentile(&s.transfers, 95.0),
                busbw: (s.time > 0.0).then(|| s.moved / s.time),
                wait: s.wait,
                culprit,
            }
        })
        .collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.wait));
    out
}

/// A Hockney fit (transfer = α + β·S) of one collective kind in the groups
/// of one role.
#[derive(Debug, Clone, PartialEq)]
pub struct FitRow {
    pub kind: CollKind,
    /// The role (`tp`), or `group NAME` for a group without one.
    pub role: String,
    pub size: usize,
    /// α in seconds, β in seconds per byte, residual (rms) in seconds.
    pub line: super::fit::Line,
    pub sizes: usize,
}

/// Hockney fits over the transfer part of the instances (the wait for late
/// members left out), per (kind, role, group size) with ≥ 2 distinct sizes:
/// the groups of one role (four tp pairs) share a shape and a fabric.
pub fn fits<'a>(rows: impl IntoIterator<Item = InstanceRow<'a>>) -> Vec<FitRow> {
    type Key = (CollKind, String, usize);
    // Points by size, not one each (see `fit::Points`).
    let mut by: BTreeMap<Key, super::fit::Points> = BTreeMap::new();
    for r in rows {
        if let (Some(kind), Some(s), true) = (r.kind, r.data_bytes, r.transfer > Ns::ZERO) {
            by.entry((kind, r.label(), r.size as usize))
                .or_default()
                .add(s as f64, r.transfer.as_f64() / 1e9);
        }
    }
    by.into_iter()
        .filter_map(|((kind, role, size), pts)| {
            Some(FitRow {
                kind,
                role,
                size,
                line: pts.line()?,
                sizes: pts.distinct(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::model::collectives::instances;

    /// The last starts read off the rows are those a walk over the members
    /// finds, for every rank's matched ops: in one group, in several, and
    /// in a run with a slow rank.
    #[test]
    fn last_starts_off_the_rows_are_the_walks() {
        let runs = [
            crate::synth::late_pair(),
            crate::synth::tp_dp_grid(true),
            crate::synth::training_run(&crate::synth::RunShape {
                straggler: Some(3),
                ..Default::default()
            }),
        ];
        for ranks in &runs {
            let t = trace(ranks);
            let inst = instances(&t);
            let groups = super::super::groups::infer(&t);
            let from_rows = rows(&t, &inst, &groups).last_starts(&inst);
            let walked = LastStarts::last_starts(&t, &inst);
            for r in &t.ranks {
                assert!(!walked.waits_of(r).is_empty());
                assert_eq!(from_rows.waits_of(r), walked.waits_of(r), "rank {}", r.rank);
            }
        }
    }

    /// A member is found from its group's sequences: rank index and the
    /// rank's op, the collective op of each rank of the pair.
    #[test]
    fn members_are_each_ranks_op_at_the_seq() {
        let t = trace(&crate::synth::late_pair());
        let inst = instances(&t);
        let comm = |r: usize| t.ranks[r].ops.iter().position(|o| o.is_comm()).unwrap();
        let i = inst.get(0);
        assert_eq!((i.len(), i.seq), (2, 0));
        assert_eq!(i.pairs().collect::<Vec<_>>(), [(0, comm(0)), (1, comm(1))]);
    }

    /// A member's step is its op's: ProfilerStep#7 here on both ranks, none
    /// for a second collective after the step.
    #[test]
    fn a_members_step_is_its_ops() {
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                let mut r = crate::synth::RankTrace::new(Some(rank), 2, 10);
                r.step(7, 0.0, 100.0);
                let name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
                r.collective(name, 10.0, 50.0, 20, &c);
                r.collective(name, 200.0, 5.0, 20, &c);
                r
            })
            .collect();
        let t = trace(&ranks);
        let rows = rows(&t, &instances(&t), &[]);
        assert_eq!(rows.len(), 2);
        let inst = instances(&t);
        let steps = |r: &InstanceRow| r.members(&t, &inst).map(|m| m.step(&t)).collect::<Vec<_>>();
        assert_eq!(steps(&rows.get(0)), [Some(7), Some(7)]);
        assert_eq!(steps(&rows.get(1)), [None, None]);
    }

    /// Rows spilled with the ranks' collectives, four to a chunk here (51
    /// collectives: 13 chunks, the last of 3), read as the held ones, with
    /// the group and kernel names they index; held when no rank is spilled.
    #[test]
    fn spilled_rows_read_as_held_ones() {
        let mut t = trace(&crate::synth::training_run(&Default::default()));
        let inst = instances(&t);
        let groups = crate::derive::groups::infer(&t);
        let held = rows(&t, &inst, &groups);
        assert_eq!(held.len(), 51);
        assert!(!held.is_spilled());
        assert!(!rows_in_chunks(&t, &inst, &groups, 4).is_spilled());
        for r in &mut t.ranks {
            r.ops.spill(&crate::model::slab::ASIDE).unwrap();
        }
        let spilled = rows_in_chunks(&t, &inst, &groups, 4);
        assert_eq!(spilled.chunks.len(), 13);
        assert_eq!(spilled.chunks[12].len(), 3);
        assert!(spilled.is_spilled());
        assert_eq!(spilled.to_vec(), held.to_vec());
        let r = spilled.get(50);
        assert_eq!((r.id, r.group, r.size), (50, "0", 8));
        assert!(r.name.starts_with("ncclDevKernel_"), "{}", r.name);
        assert_eq!(grouped(&spilled), grouped(&held));
    }

    #[test]
    fn late_pair_row() {
        // Rank 0 starts at 10 µs, rank 1 at 40 µs, both end at 60 µs; one f32.
        let t = trace(&crate::synth::late_pair());
        let inst = instances(&t);
        let rows = rows(&t, &inst, &[]);
        assert_eq!(rows.len(), 1);
        let r = &rows.get(0);
        assert_eq!((r.last_rank, r.last_by), (1, Ns(30_000)));
        assert_eq!((r.size, r.last_start), (2, Ns(40_000)));
        assert_eq!(r.wait, Ns(30_000));
        // Rank 0 waited 30 µs for rank 1, which was that much late.
        assert_eq!(r.caused, Ns(30_000));
        assert_eq!(r.transfer, Ns(20_000));
        assert_eq!((r.start, r.end), (Ns(10_000), Ns(60_000)));
        let m: Vec<Member> = r.members(&t, &inst).collect();
        assert_eq!(
            (m[0].rank, m[0].start, m[0].wait),
            (0, Ns(10_000), Ns(30_000))
        );
        assert_eq!((m[0].transfer, m[0].end()), (Ns(20_000), Ns(60_000)));
        assert_eq!(
            (m[1].rank, m[1].wait, m[1].transfer),
            (1, Ns::ZERO, Ns(20_000))
        );
        // 4 B in 20 µs = 200,000 B/s; all-reduce of 2: factor 2(2-1)/2 = 1.
        assert_eq!(r.algbw(), Some(200_000.0));
        assert_eq!(r.busbw(), Some(200_000.0));
    }

    #[test]
    fn grouping_blames_the_rank_that_caused_most_wait() {
        let t = trace(&crate::synth::late_pair());
        let rows = rows(&t, &instances(&t), &[]);
        let mut rows = rows.to_vec();
        // A second instance of the same shape where rank 0 is 5 µs late.
        let mut second = rows[0].clone();
        second.id = 1;
        second.last_rank = 0;
        second.last_by = Ns(5_000);
        second.wait = Ns(5_000);
        second.caused = Ns(5_000);
        second.transfer = Ns(40_000);
        rows.push(second);
        let g = grouped(rows);
        assert_eq!(g.len(), 1);
        let g = &g[0];
        assert_eq!(g.count, 2);
        assert_eq!((g.transfer_p50, g.transfer_p95), (Ns(20_000), Ns(40_000)));
        assert_eq!(g.wait, Ns(35_000));
        assert_eq!(g.culprit, Some((1, Ns(30_000))));
        // 4 B over 20 µs and 4 B over 40 µs: 8 B / 60 µs.
        assert!((g.busbw.unwrap() - 8.0 / 60e-6).abs() < 1e-6);
    }

    #[test]
    fn hockney_per_kind_and_group() {
        let t = trace(&crate::synth::late_pair());
        let rows = rows(&t, &instances(&t), &[]);
        let one = rows.to_vec();
        // One size: no fit.
        assert!(fits(one.iter().cloned()).is_empty());
        // Sizes 4 and 8 B taking 20 and 30 µs: α = 10 µs, β = 2.5 µs/B.
        let mut two = one.clone();
        two.push(InstanceRow {
            id: 1,
            data_bytes: Some(8),
            bytes: Some(8),
            transfer: Ns(30_000),
            ..one[0].clone()
        });
        let f = fits(two);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].kind, f[0].sizes, f[0].line.points),
            (CollKind::AllReduce, 2, 2)
        );
        assert!((f[0].line.alpha - 10e-6).abs() < 1e-15);
        assert!((f[0].line.beta - 2.5e-6).abs() < 1e-15);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Ns> = (1..=20).map(Ns).collect();
        assert_eq!(percentile(&v, 50.0), Ns(10));
        assert_eq!(percentile(&v, 95.0), Ns(19));
        assert_eq!(percentile(&[Ns(7)], 95.0), Ns(7));
        assert_eq!(percentile(&[], 50.0), Ns::ZERO);
    }
}
