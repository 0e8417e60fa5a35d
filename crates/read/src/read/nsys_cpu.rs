//! The CPU side of an Nsight Systems export (SQLite or JSON): NVTX ranges and
//! CUDA runtime and driver calls, the calls as far as the model uses them. A
//! metric reads only kernel launches and the calls that issued a device op
//! (for its launch time); the UI's CPU lanes take the others as they are
//! read (SQLite) or kept whole with their threads and names (JSON, whose
//! processes are known only at its end); a run's synchronize and
//! event-query polling, most of its calls and four times the memory of its
//! device ops, is reduced to each process's earliest and latest call, which
//! the trace's time span counts. A call with damaged times is kept whole, so
//! that it is counted as damaged.

use std::sync::Arc;

use crate::model::time::in_range;
use crate::model::Ns;

/// A CPU-side range (NVTX) or call (runtime), by process.
#[derive(Clone)]
pub(super) struct Cpu {
    pub pid: i64,
    pub tid: u64,
    pub start: Ns,
    pub end: Ns,
    pub name: Arc<str>,
}

/// A call that may have issued a device op, while the ops are not all read
/// (a JSON export is in time order: a call comes before its op): its launch
/// time alone.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
struct Maybe {
    order: u32,
    pid: u32,
    correlation: i64,
    start: Ns,
}

/// The waiting calls, most of a run's (its polling), as they came: each as
/// its difference from the one before, field by field, in zigzag varints
/// (prost's). Consecutive calls of a process differ by little, so a call
/// takes 5-8 bytes where its values take 24, and only the few that issued
/// an op are ever made values again. Chunks are never moved.
#[derive(Default)]
struct Waiting {
    chunks: Vec<Vec<u8>>,
    last: Maybe,
    len: usize,
}

impl Waiting {
    const CHUNK: usize = 1 << 20;
    /// The most one call takes: four varints of 10 bytes.
    const MOST: usize = 40;

    fn push(&mut self, m: Maybe) {
        let room = |c: &Vec<u8>| c.capacity() - c.len() >= Self::MOST;
        if !self.chunks.last().is_some_and(room) {
            // Each chunk counts from zero: it reads back on its own.
            self.chunks.push(Vec::with_capacity(Self::CHUNK));
            self.last = Maybe::default();
        }
        let Some(chunk) = self.chunks.last_mut() else {
            return;
        };
        let l = self.last;
        for d in [
            i64::from(m.order).wrapping_sub(i64::from(l.order)),
            i64::from(m.pid).wrapping_sub(i64::from(l.pid)),
            m.correlation.wrapping_sub(l.correlation),
            m.start.get().wrapping_sub(l.start.get()),
        ] {
            prost::encoding::encode_varint(((d << 1) ^ (d >> 63)) as u64, chunk);
        }
        self.last = m;
        self.len += 1;
    }

    fn iter(&self) -> impl Iterator<Item = Maybe> + '_ {
        self.chunks.iter().flat_map(|c| {
            let mut rest: &[u8] = c;
            let mut last = Maybe::default();
            std::iter::from_fn(move || {
                if rest.is_empty() {
                    return None;
                }
                let mut next = || {
                    let z = prost::encoding::decode_varint(&mut rest).ok()?;
                    Some(((z >> 1) as i64) ^ -((z & 1) as i64))
                };
                let d = [next()?, next()?, next()?, next()?];
                last = Maybe {
                    order: (i64::from(last.order).wrapping_add(d[0])) as u32,
                    pid: (i64::from(last.pid).wrapping_add(d[1])) as u32,
                    correlation: last.correlation.wrapping_add(d[2]),
                    start: Ns(last.start.get().wrapping_add(d[3])),
                };
                Some(last)
            })
        })
    }
}

/// The (process, correlation id) pairs of an export's device ops, looked
/// up for each of its millions of calls. A bit per correlation id answers
/// most (calls that issued nothing) without the set, whose lookups missed
/// the cache (18 MB for 584 K ops: 88 % of taking a call); correlation ids
/// count up from 1, so the bits of 4 M calls take 0.5 MB.
#[derive(Default)]
pub(super) struct Issued {
    pairs: foldhash::HashSet<(i64, i64)>,
    ids: Vec<u64>,
}

impl Issued {
    /// Ids past it are looked up in the set alone (their bits would take
    /// more than 8 MB).
    const IDS: i64 = 1 << 26;

    pub(super) fn reserve(&mut self, n: usize) {
        let _ = self.pairs.try_reserve(n);
    }

    pub(super) fn insert(&mut self, pid: i64, correlation: i64) {
        self.pairs.insert((pid, correlation));
        if (0..Self::IDS).contains(&correlation) {
            let word = (correlation / 64) as usize;
            if self.ids.len() <= word {
                self.ids.resize(word + 1, 0);
            }
            self.ids[word] |= 1 << (correlation % 64);
        }
    }

    pub(super) fn contains(&self, pid: i64, correlation: i64) -> bool {
        let bit = || {
            let word = self.ids.get((correlation / 64) as usize);
            word.is_some_and(|w| w >> (correlation % 64) & 1 == 1)
        };
        (!(0..Self::IDS).contains(&correlation) || bit())
            && self.pairs.contains(&(pid, correlation))
    }

    pub(super) fn len(&self) -> usize {
        self.pairs.len()
    }
}

impl FromIterator<(i64, i64)> for Issued {
    fn from_iter<I: IntoIterator<Item = (i64, i64)>>(iter: I) -> Self {
        let mut issued = Issued::default();
        iter.into_iter().for_each(|(p, c)| issued.insert(p, c));
        issued
    }
}

/// What `TimelineBuilder::between` counts as damaged.
pub(super) fn damaged(start: Ns, end: Ns) -> bool {
    !in_range(start) || !in_range(end) || !in_range((end - start).max(Ns::ZERO))
}

/// A runtime call as kept: 32 bytes, where a [`Cpu`] and its correlation
/// id took 56. Its thread and name are kept apart, with CPU lanes only
/// (without them, a metric reads a call's process, times, correlation id
/// and whether it launched a kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Call {
    /// The process (24 bits, as [`super::nsys::pid`] reads it) and, in the
    /// top bit, whether the call is a launch.
    who: u32,
    /// Its place among the calls as read (each process's ends after them
    /// all); with CPU lanes, where its thread and name are in [`Kept::lanes`].
    pub order: u32,
    pub correlation: i64,
    pub start: Ns,
    pub end: Ns,
}

const _: () = assert!(std::mem::size_of::<Call>() == 32);

impl Call {
    const LAUNCH: u32 = 1 << 31;

    fn new(pid: i64, launch: bool, order: u32, correlation: i64, start: Ns, end: Ns) -> Self {
        let pid = (pid & 0xFF_FFFF) as u32;
        Call {
            who: if launch { pid | Self::LAUNCH } else { pid },
            order,
            correlation,
            start,
            end,
        }
    }

    pub(super) fn pid(&self) -> i64 {
        i64::from(self.who & !Self::LAUNCH)
    }

    /// A kernel launch (`cudaLaunchKernel`, `cuLaunchKernelEx`, ...).
    pub(super) fn launch(&self) -> bool {
        self.who & Self::LAUNCH != 0
    }
}

/// Each call's thread and name, by its order (with CPU lanes).
pub(super) type Lanes = Vec<(u64, Arc<str>)>;

/// The calls kept from an export: see [`Calls`].
pub(super) struct Kept {
    pub calls: Vec<Call>,
    /// With CPU lanes, each call's thread and name, by its order.
    pub lanes: Lanes,
}

pub(super) struct Calls<'a> {
    lanes: bool,
    /// The (process, correlation) pairs of every device op, where they are
    /// known before the calls (SQLite); without them a call that is neither
    /// a launch nor damaged waits for [`Calls::finish`] as its launch time
    /// alone.
    issued: Option<&'a Issued>,
    kept: Vec<Call>,
    names: Lanes,
    maybe: Waiting,
    /// Each process's earliest and latest call of the others.
    ends: foldhash::HashMap<i64, [Call; 2]>,
    count: u32,
}

impl<'a> Calls<'a> {
    /// For calls read before the ops (JSON).
    pub(super) fn new(lanes: bool) -> Self {
        Self::with(lanes, None)
    }

    /// For calls read after the ops, whose (process, correlation) pairs
    /// are `issued` (SQLite), without CPU lanes (the reader puts a call on
    /// its lane as it reads it).
    pub(super) fn after(issued: &'a Issued) -> Self {
        let mut calls = Self::with(false, Some(issued));
        // Each op's issuer is kept: room for them at once, where doubling
        // would hold two copies (launches that issued nothing are few), and
        // for the ends of 128 processes, added last.
        let _ = calls.kept.try_reserve_exact(issued.len() + 256);
        calls
    }

    fn with(lanes: bool, issued: Option<&'a Issued>) -> Self {
        Calls {
            lanes,
            issued,
            kept: Vec::new(),
            names: Vec::new(),
            maybe: Waiting::default(),
            ends: Default::default(),
            count: 0,
        }
    }

    /// Takes one call.
    pub(super) fn push(&mut self, call: Cpu, correlation: i64) {
        // Past 4 G calls, the latest share a place: only the order of calls
        // with the same start could change, which no export has.
        let order = self.count;
        self.count = self.count.saturating_add(1);
        let damaged = damaged(call.start, call.end);
        let launch = call.name.contains("Launch");
        let kept = Call::new(call.pid, launch, order, correlation, call.start, call.end);
        let whole = self.lanes
            || damaged
            || launch
            || (self.issued).is_some_and(|s| s.contains(call.pid, correlation));
        if whole {
            self.kept.push(kept);
            if self.lanes {
                self.names.push((call.tid, call.name));
            }
            return;
        }
        if self.issued.is_none() {
            if let Ok(pid) = u32::try_from(call.pid) {
                self.maybe.push(Maybe {
                    order,
                    pid,
                    correlation,
                    start: call.start,
                });
            }
        }
        let last = |c: &Call| c.end.max(c.start);
        match self.ends.get_mut(&call.pid) {
            Some([first, latest]) => {
                if kept.start < first.start {
                    *first = kept;
                }
                if last(&kept) > last(latest) {
                    *latest = kept;
                }
            }
            None => {
                self.ends.insert(call.pid, [kept; 2]);
            }
        }
    }

    /// The calls to keep: those kept whole, then each waiting call that
    /// issued one of `ops` (the (process, correlation) pair of each device
    /// op), then each process's earliest and latest other call (whose
    /// correlation, `i64::MIN`, is none a device op has, and whose order
    /// comes after every call's). A waiting call is kept as a moment at its
    /// start: its span is within its process's ends, and it is no launch.
    pub(super) fn finish(self, ops: impl Iterator<Item = (i64, i64)>) -> Kept {
        let Calls {
            mut kept,
            names,
            maybe,
            ends,
            count,
            ..
        } = self;
        if maybe.len > 0 {
            let issued: Issued = ops.collect();
            kept.extend(
                (maybe.iter())
                    .filter(|m| issued.contains(i64::from(m.pid), m.correlation))
                    .map(|m| {
                        let pid = i64::from(m.pid);
                        Call::new(pid, false, m.order, m.correlation, m.start, m.start)
                    }),
            );
        }
        drop(maybe);
        // In process order, whatever the map's.
        let mut ends: Vec<(i64, [Call; 2])> = ends.into_iter().collect();
        ends.sort_unstable_by_key(|e| e.0);
        kept.extend(
            (ends.into_iter().flat_map(|e| e.1))
                .zip(0u32..)
                .map(|(c, i)| Call {
                    order: count.saturating_add(i),
                    correlation: i64::MIN,
                    ..c
                }),
        );
        Kept {
            calls: kept,
            lanes: names,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(pid: i64, start: i64, end: i64, name: &str) -> Cpu {
        Cpu {
            pid,
            tid: 7,
            start: Ns(start),
            end: Ns(end),
            name: name.into(),
        }
    }

    /// (process, start, end, launch, correlation) of each call kept, in
    /// their order.
    fn kept(calls: Calls, ops: &[(i64, i64)]) -> Vec<(i64, i64, i64, bool, i64)> {
        let mut calls = calls.finish(ops.iter().copied()).calls;
        calls.sort_by_key(|c| c.order);
        (calls.iter())
            .map(|c| {
                (
                    c.pid(),
                    c.start.get(),
                    c.end.get(),
                    c.launch(),
                    c.correlation,
                )
            })
            .collect()
    }

    /// The waiting calls read back as they were written, whatever their
    /// differences (extremes included) and across chunks; a real run's
    /// polling takes a few bytes a call.
    #[test]
    fn waiting_calls_read_back_as_written() {
        use proptest::prelude::*;
        let maybe = (any::<u32>(), any::<u32>(), any::<i64>(), any::<i64>()).prop_map(
            |(order, pid, correlation, start)| Maybe {
                order,
                pid,
                correlation,
                start: Ns(start),
            },
        );
        proptest!(|(v in proptest::collection::vec(maybe, 0..200))| {
            let mut w = Waiting::default();
            v.iter().for_each(|&m| w.push(m));
            prop_assert_eq!(w.iter().collect::<Vec<_>>(), v);
        });
        // Polling: a call every 3 µs, correlation ids one apart, past two
        // chunks.
        let mut w = Waiting::default();
        let polling: Vec<Maybe> = (0..400_000u32)
            .map(|i| Maybe {
                order: i * 2,
                pid: 4242,
                correlation: 1_000_000 + i64::from(i),
                start: Ns(1_700_000_000_000_000_000 + i64::from(i) * 3_000),
            })
            .collect();
        polling.iter().for_each(|&m| w.push(m));
        let bytes: usize = w.chunks.iter().map(Vec::len).sum();
        assert!(w.chunks.len() >= 2 && bytes <= 6 * polling.len(), "{bytes}");
        assert!(w.iter().eq(polling.iter().copied()));
    }

    /// A copy call (correlation 5) issues an op, a launch (6) another; an
    /// event query and a synchronize issue none; a call on process 2 ends
    /// past the time limit.
    fn push_all(calls: &mut Calls) {
        calls.push(call(1, 100, 110, "cudaMemcpyAsync"), 5);
        calls.push(call(1, 120, 125, "cudaLaunchKernel"), 6);
        calls.push(call(1, 50, 60, "cudaEventQuery"), 7);
        calls.push(call(1, 200, 400, "cudaStreamSynchronize"), 8);
        calls.push(call(2, 10, i64::MAX, "cudaFree"), 9);
    }

    /// A pair is issued only as inserted, whatever its correlation id
    /// (negative, past the bits, on a word not made).
    #[test]
    fn issued_pairs_are_found_with_or_without_their_bit() {
        let far = Issued::IDS + 5;
        let issued: Issued = [(1, 5), (2, 64), (1, -1), (3, far)].into_iter().collect();
        for (pair, is) in [
            ((1, 5), true),
            ((2, 5), false),
            ((2, 64), true),
            ((1, 64), false),
            ((1, -1), true),
            ((1, -2), false),
            ((3, far), true),
            ((3, far + 1), false),
            ((1, 6), false),
            ((1, 10_000), false),
        ] {
            assert_eq!(issued.contains(pair.0, pair.1), is, "{pair:?}");
        }
        assert_eq!(issued.len(), 4);
    }

    /// A kept call's process is the 24 bits a global id has, its launch
    /// flag beside it.
    #[test]
    fn a_call_holds_its_process_and_whether_it_launched() {
        for (pid, launch) in [
            (0, true),
            (0xFF_FFFF, true),
            (0xFF_FFFF, false),
            (4242, false),
        ] {
            let c = Call::new(pid, launch, 3, -1, Ns(1), Ns(2));
            assert_eq!((c.pid(), c.launch(), c.order), (pid, launch, 3));
        }
    }

    #[test]
    fn calls_before_their_ops_keep_launches_issuers_and_ends() {
        let mut calls = Calls::new(false);
        push_all(&mut calls);
        let min = i64::MIN;
        assert_eq!(
            kept(calls, &[(1, 5), (1, 6)]),
            [
                // The copy, as a moment at its start: it came first.
                (1, 100, 100, false, 5),
                (1, 120, 125, true, 6),
                (2, 10, i64::MAX, false, 9),
                // Process 1's earliest and latest other call: the copy's
                // span (100..110) is within them.
                (1, 50, 60, false, min),
                (1, 200, 400, false, min),
            ]
        );
    }

    #[test]
    fn calls_after_their_ops_keep_issuers_whole() {
        let issued = [(1, 5), (1, 6)].into_iter().collect();
        let mut calls = Calls::after(&issued);
        push_all(&mut calls);
        let min = i64::MIN;
        assert_eq!(
            kept(calls, &[]),
            [
                (1, 100, 110, false, 5),
                (1, 120, 125, true, 6),
                (2, 10, i64::MAX, false, 9),
                (1, 50, 60, false, min),
                (1, 200, 400, false, min),
            ]
        );
    }

    #[test]
    fn with_lanes_every_call_is_kept_whole_in_order() {
        let mut calls = Calls::new(true);
        push_all(&mut calls);
        let Kept { calls, lanes } = calls.finish(std::iter::empty());
        let corr: Vec<(u32, i64)> = calls.iter().map(|c| (c.order, c.correlation)).collect();
        assert_eq!(corr, [(0, 5), (1, 6), (2, 7), (3, 8), (4, 9)]);
        // Each call's thread and name, by its order.
        assert_eq!(lanes.len(), 5);
        assert_eq!((lanes[2].0, &*lanes[2].1), (7, "cudaEventQuery"));
    }

    /// Two calls with one correlation id (the second wins a launch-time
    /// lookup): a waiting one before a whole one stays before it.
    #[test]
    fn waiting_and_whole_calls_keep_their_order() {
        let mut calls = Calls::new(false);
        calls.push(call(1, 10, 20, "cudaMemsetAsync"), 3);
        calls.push(call(1, 30, 40, "cudaLaunchKernel"), 3);
        calls.push(call(1, 50, 60, "cudaMemcpyAsync"), 4);
        let order: Vec<(i64, i64)> = (kept(calls, &[(1, 3), (1, 4)]).iter())
            .map(|k| (k.1, k.4))
            .collect();
        assert_eq!(
            order,
            [(10, 3), (30, 3), (50, 4), (10, i64::MIN), (50, i64::MIN)]
        );
    }
}
