//! Values held in memory, or spilled to a temporary file that the kernel
//! pages in and out: a rank's device ops, its exposed-communication
//! intervals, the run's collective sequences. A load spills what it keeps of
//! a rank's collectives when the run's would not fit comfortably in memory
//! (see `load::HELD_COMM_OPS`): the cross-rank figures read every rank's
//! collectives in issue order, a block of each rank's at a time (see
//! [`Reader`]), so the kernel keeps in memory what it can spare and reads
//! the rest back from the file. The heap no longer grows with them; where
//! memory is shorter than they are, each pass over them reads the file
//! again, in blocks.
//!
//! The crate's only unsafe code: a map read as a slice of values. Each block
//! says why it is sound.
#![allow(unsafe_code)]

use std::io::Write;
use std::ops::{Deref, DerefMut};

use super::collectives::Figures;
use super::intervals::Interval;
use super::timeline::{Activity, PackedWork, Slot};
use super::{CollKind, DeviceOp, KernelClass, Ns, StrId};

/// A rank's device ops, held or spilled.
pub type Ops = Slab<DeviceOp>;

/// A value that can be written to a file as its bytes and read back from
/// them.
///
/// # Safety
/// Every byte of a value must be initialised (no padding), and bytes
/// written from a valid value must read back as that value.
pub unsafe trait Plain: Clone {}

// An op is written to the file as its bytes, which is sound only if it has
// no padding (uninitialised bytes): its size must be its fields' sizes.
const _: () = {
    use std::mem::size_of;
    let fields = 3 * size_of::<Ns>()
        + size_of::<StrId>()
        + size_of::<Activity>()
        + size_of::<KernelClass>()
        + size_of::<Option<CollKind>>()
        + 2 * size_of::<u32>()
        + size_of::<PackedWork>()
        + 2 * size_of::<Slot>();
    assert!(size_of::<DeviceOp>() == fields);
    assert!(size_of::<Interval>() == 2 * size_of::<Ns>());
    let figures = 7 * size_of::<Ns>()
        + 2 * size_of::<u64>()
        + 6 * size_of::<u32>()
        + size_of::<Option<CollKind>>()
        + size_of::<u8>()
        + 6;
    assert!(size_of::<Figures>() == figures);
};

// SAFETY: no padding (asserted above); its fields are integers and enums
// whose bytes, written from a valid op, read back as that op.
unsafe impl Plain for DeviceOp {}
// SAFETY: two integers, no padding (asserted above).
unsafe impl Plain for Interval {}
// SAFETY: integers and a fieldless enum's option, no padding (asserted
// above).
unsafe impl Plain for Figures {}
// SAFETY: an integer.
unsafe impl Plain for u32 {}

/// Values held in a vector or spilled to a file; either way a slice (see
/// the module).
pub struct Slab<T: Plain>(Store<T>);

enum Store<T> {
    Held(Vec<T>),
    Spilled(Spill<T>),
}

impl<T: Plain> Default for Slab<T> {
    fn default() -> Self {
        Self(Store::Held(Vec::new()))
    }
}

/// Values in a file-backed map: `len` of them from its first byte.
struct Spill<T> {
    map: memmap2::MmapMut,
    len: usize,
    of: std::marker::PhantomData<T>,
}

impl<T: Plain> Spill<T> {
    /// `values` written to an unnamed temporary file (in `TMPDIR`), mapped.
    fn of(values: &[T]) -> std::io::Result<Self> {
        let mut file = tempfile::tempfile()?;
        // SAFETY: `T` is `Plain`, so all of the slice's bytes are
        // initialised.
        let bytes = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
        };
        // Written, not copied into a map of a sparse file: a full disk is
        // then an error here, not a SIGBUS when the kernel writes pages back.
        file.write_all(bytes)?;
        // SAFETY: the file has no name (`tempfile` unlinks it at once), so
        // no other process opens it and this map is its only user; the map
        // keeps it open.
        let map = unsafe { memmap2::MmapMut::map_mut(&file)? };
        Ok(Self {
            map,
            len: values.len(),
            of: std::marker::PhantomData,
        })
    }

    fn values(&self) -> &[T] {
        // Page-aligned, so aligned for any value a slab holds.
        debug_assert!(self.map.as_ptr().align_offset(std::mem::align_of::<T>()) == 0);
        // SAFETY: the map is page-aligned (more than a value's alignment)
        // and holds `len` values' bytes, written from valid values (`Plain`)
        // and only ever changed through `values_mut`, as values.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<T>(), self.len) }
    }

    fn values_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `values`; the map is borrowed mutably, so uniquely.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Plain> Slab<T> {
    /// Moves the values to a temporary file (see the module); none when
    /// there are none or they are already there. On an error (no temporary
    /// folder, a full disk) they stay held.
    pub fn spill(&mut self) -> std::io::Result<()> {
        let Store::Held(values) = &self.0 else {
            return Ok(());
        };
        if values.is_empty() {
            return Ok(());
        }
        self.0 = Store::Spilled(Spill::of(values)?);
        Ok(())
    }

    pub fn is_spilled(&self) -> bool {
        matches!(self.0, Store::Spilled(_))
    }

    /// Keeps the first `n` values (a spilled slab keeps its file).
    pub fn truncate(&mut self, n: usize) {
        match &mut self.0 {
            Store::Held(v) => {
                v.truncate(n);
                v.shrink_to_fit();
            }
            Store::Spilled(s) => s.len = s.len.min(n),
        }
    }

    /// The values as a vector to grow or cut: spilled ones are read back.
    pub fn vec_mut(&mut self) -> &mut Vec<T> {
        if let Store::Spilled(s) = &self.0 {
            self.0 = Store::Held(s.values().to_vec());
        }
        match &mut self.0 {
            Store::Held(v) => v,
            Store::Spilled(_) => unreachable!("read back above"),
        }
    }

    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.values().to_vec(),
        }
    }
}

/// Reads a slab's values at rising positions a block at a time, copied out
/// of a spilled slab's map after asking the kernel for the whole block
/// (`MADV_WILLNEED`): a pass that reads many slabs in step (a collective's
/// members, one in each rank's ops) then reads each file in blocks of its
/// own size. Read a page at a time, a fault reads the pages around it too
/// (`read_ahead_kb`, 8 MB on some disks), for each of the slabs in step:
/// where memory is short, those are dropped before they are used, and a
/// pass read the file forty times over. A held slab is read in place.
pub struct Reader<'a, T: Plain> {
    slab: &'a Slab<T>,
    block: Vec<T>,
    /// The position of `block[0]`.
    from: usize,
    per_block: usize,
}

impl<T: Plain> Slab<T> {
    /// A reader copying up to `block_bytes` at a time (at least one value).
    pub fn reader(&self, block_bytes: usize) -> Reader<'_, T> {
        Reader {
            slab: self,
            block: Vec::new(),
            from: 0,
            per_block: (block_bytes / std::mem::size_of::<T>().max(1)).max(1),
        }
    }
}

impl<T: Plain> Reader<'_, T> {
    /// The value at `i` (panics past the end, as indexing does). Reads are
    /// cheapest at rising positions: one before the block reads a new one.
    pub fn get(&mut self, i: usize) -> T {
        let Store::Spilled(s) = &self.slab.0 else {
            return self.slab[i].clone();
        };
        if !(self.from..self.from + self.block.len()).contains(&i) {
            let values = s.values();
            let n = self.per_block.min(values.len().saturating_sub(i)).max(1);
            let size = std::mem::size_of::<T>();
            // A hint: on an error the copy faults the pages in as before.
            let _ = s
                .map
                .advise_range(memmap2::Advice::WillNeed, i * size, n * size);
            self.block.clear();
            self.block.extend_from_slice(&values[i..i + n]);
            self.from = i;
        }
        self.block[i - self.from].clone()
    }
}

impl<T: Plain> Deref for Slab<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.values(),
        }
    }
}

impl<T: Plain> DerefMut for Slab<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.values_mut(),
        }
    }
}

impl<T: Plain> Clone for Slab<T> {
    /// A held copy, wherever the values are: a rank is copied only to be
    /// given other ops (an export reads one rank's whole) or in tests.
    fn clone(&self) -> Self {
        Self(Store::Held(self.to_vec()))
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Equal when the values are, wherever they are kept.
impl<T: Plain + PartialEq> PartialEq for Slab<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Plain + Eq> Eq for Slab<T> {}

impl<T: Plain> From<Vec<T>> for Slab<T> {
    fn from(v: Vec<T>) -> Self {
        Self(Store::Held(v))
    }
}

impl<T: Plain> FromIterator<T> for Slab<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self(Store::Held(iter.into_iter().collect()))
    }
}

impl<'a, T: Plain> IntoIterator for &'a Slab<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: Plain> IntoIterator for &'a mut Slab<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Activity, KernelClass, StrId};

    fn ops(n: i64) -> Vec<DeviceOp> {
        (0..n)
            .map(|i| {
                let mut op = DeviceOp::new(
                    StrId(i as u32 % 3),
                    Activity::Kernel,
                    KernelClass::Communication,
                    Ns(i * 100),
                    Ns(50 + i),
                );
                op.coll = Some(CollKind::AllReduce);
                op.stream = 7;
                op.work = Some(crate::Work::Bytes(1 << 20)).into();
                op.meta = Slot::from(Some(i as u32));
                op
            })
            .collect()
    }

    /// Spilled ops read as they were held, take changes (clock alignment
    /// shifts them) and keep them when copied or read back.
    #[test]
    fn spilled_ops_are_the_held_ones() {
        let held = ops(1000);
        let mut o = Ops::from(held.clone());
        o.spill().unwrap();
        assert!(o.is_spilled());
        assert_eq!(&o[..], &held[..]);
        for op in o.iter_mut() {
            op.start += Ns(7);
        }
        let shifted: Vec<DeviceOp> = held
            .iter()
            .map(|op| DeviceOp {
                start: op.start + Ns(7),
                ..op.clone()
            })
            .collect();
        assert_eq!(&o[..], &shifted[..]);
        let copy = o.clone();
        assert!(!copy.is_spilled());
        assert_eq!(&copy[..], &shifted[..]);
        assert_eq!(o.partition_point(|op| op.start < Ns(507)), 5);
        o.vec_mut().push(held[0].clone());
        assert!(!o.is_spilled());
        assert_eq!(o.len(), 1001);
        assert_eq!(copy.into_vec(), shifted);
    }

    /// Cut to its first values, held or spilled alike (a group's
    /// sequences are cut to the shortest rank's).
    #[test]
    fn a_slab_is_cut_where_it_is_kept() {
        let values: Vec<u32> = (0..5000).collect();
        let mut held = Slab::from(values.clone());
        let mut spilled = Slab::from(values);
        spilled.spill().unwrap();
        for n in [6000, 4096, 3] {
            held.truncate(n);
            spilled.truncate(n);
            assert!(spilled.is_spilled() && !held.is_spilled());
            assert_eq!(held, spilled);
            assert_eq!(spilled.len(), n.min(5000));
        }
        assert_eq!(&spilled[..], &[0, 1, 2]);
    }

    #[test]
    fn a_reader_reads_held_and_spilled_alike() {
        let values: Vec<u32> = (0..1000).map(|i| i * 7).collect();
        let held = Slab::from(values.clone());
        let mut spilled = Slab::from(values.clone());
        spilled.spill().unwrap();
        assert!(spilled.is_spilled());
        // Blocks of 64 values; rising, within a block, and back again.
        for slab in [&held, &spilled] {
            let mut r = slab.reader(256);
            for i in (0..1000).step_by(3).chain([999, 5, 6, 700, 0]) {
                assert_eq!(r.get(i), values[i], "value {i}");
            }
        }
        let mut one = spilled.reader(1);
        assert_eq!((one.get(10), one.get(11), one.get(3)), (70, 77, 21));
    }

    #[test]
    fn no_ops_are_not_spilled() {
        let mut o = Ops::default();
        o.spill().unwrap();
        assert!(!o.is_spilled());
        assert!(o.is_empty());
    }
}
