//! Values held in memory, or moved out of the heap by a store the load
//! chose (ccl-store's `spill`: a temporary file the kernel pages in and out):
//! a rank's device ops, its exposed-communication intervals, the run's
//! collective sequences and rows. The model knows only the interface: a
//! slice either way, read in blocks by the passes across ranks (see
//! [`Reader`]). How values are written and read back, and the unsafe code
//! that takes, is the store's.

use std::ops::{Deref, DerefMut};

use super::figures::Figures;
use super::interval::Interval;
use super::op::DeviceOp;

/// A rank's device ops, held or spilled.
pub type Ops = Slab<DeviceOp>;

/// Values moved out of the heap: a slice still.
pub trait Backing<T: Clone>: Send + Sync {
    fn values(&self) -> &[T];
    fn values_mut(&mut self) -> &mut [T];
    /// Keeps the first `n` values (or all, when fewer).
    fn truncate(&mut self, n: usize);
    /// Copies the `n` values from `from` into `out` (emptied first), having
    /// asked for all of them at once where that helps (see [`Reader`]).
    fn copy_block(&self, from: usize, n: usize, out: &mut Vec<T>) {
        out.clear();
        out.extend_from_slice(&self.values()[from..from + n]);
    }
    /// Where the values went: values made from them go there too.
    fn store(&self) -> &'static dyn Spill;
}

/// A place values leave the heap for: one method per kind of value that may
/// go there (a store writes each as its bytes, which it alone can vouch for).
pub trait Spill: Send + Sync {
    fn ops(&self, values: &[DeviceOp]) -> std::io::Result<Box<dyn Backing<DeviceOp>>>;
    fn intervals(&self, values: &[Interval]) -> std::io::Result<Box<dyn Backing<Interval>>>;
    fn figures(&self, values: &[Figures]) -> std::io::Result<Box<dyn Backing<Figures>>>;
    fn indices(&self, values: &[u32]) -> std::io::Result<Box<dyn Backing<u32>>>;
}

/// A value a [`Spill`] takes.
pub trait Spillable: Clone + Send + Sync + 'static {
    fn put(to: &dyn Spill, values: &[Self]) -> std::io::Result<Box<dyn Backing<Self>>>;
}

impl Spillable for DeviceOp {
    fn put(to: &dyn Spill, values: &[Self]) -> std::io::Result<Box<dyn Backing<Self>>> {
        to.ops(values)
    }
}

impl Spillable for Interval {
    fn put(to: &dyn Spill, values: &[Self]) -> std::io::Result<Box<dyn Backing<Self>>> {
        to.intervals(values)
    }
}

impl Spillable for Figures {
    fn put(to: &dyn Spill, values: &[Self]) -> std::io::Result<Box<dyn Backing<Self>>> {
        to.figures(values)
    }
}

impl Spillable for u32 {
    fn put(to: &dyn Spill, values: &[Self]) -> std::io::Result<Box<dyn Backing<Self>>> {
        to.indices(values)
    }
}

/// Values held in a vector or moved to a [`Spill`]; either way a slice.
pub struct Slab<T: Spillable>(Store<T>);

enum Store<T> {
    Held(Vec<T>),
    Spilled(Box<dyn Backing<T>>),
}

impl<T: Spillable> Default for Slab<T> {
    fn default() -> Self {
        Self(Store::Held(Vec::new()))
    }
}

impl<T: Spillable> Slab<T> {
    /// Moves the values to `to`; none when there are none or they are
    /// already spilled. On an error (no temporary folder, a full disk) they
    /// stay held.
    pub fn spill(&mut self, to: &dyn Spill) -> std::io::Result<()> {
        let Store::Held(values) = &self.0 else {
            return Ok(());
        };
        if values.is_empty() {
            return Ok(());
        }
        self.0 = Store::Spilled(T::put(to, values)?);
        Ok(())
    }

    pub fn is_spilled(&self) -> bool {
        matches!(self.0, Store::Spilled(_))
    }

    /// Where the values were spilled to, if they were.
    pub(crate) fn spilled_to(&self) -> Option<&'static dyn Spill> {
        match &self.0 {
            Store::Held(_) => None,
            Store::Spilled(b) => Some(b.store()),
        }
    }

    /// Keeps the first `n` values (a spilled slab stays spilled).
    pub fn truncate(&mut self, n: usize) {
        match &mut self.0 {
            Store::Held(v) => {
                v.truncate(n);
                v.shrink_to_fit();
            }
            Store::Spilled(s) => s.truncate(n),
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

/// Reads a slab's values at rising positions a block at a time, copied out
/// of a spilled slab after asking for the whole block: a pass that reads
/// many slabs in step (a collective's members, one in each rank's ops) then
/// reads each file in blocks of its own size. Read a page at a time, a fault
/// reads the pages around it too (`read_ahead_kb`, 8 MB on some disks), for
/// each of the slabs in step: where memory is short, those are dropped
/// before they are used, and a pass read the file forty times over. A held
/// slab is read in place.
pub struct Reader<'a, T: Spillable> {
    slab: &'a Slab<T>,
    block: Vec<T>,
    /// The position of `block[0]`.
    from: usize,
    per_block: usize,
}

impl<T: Spillable> Reader<'_, T> {
    /// The value at `i` (panics past the end, as indexing does). Reads are
    /// cheapest at rising positions: one before the block reads a new one.
    pub fn get(&mut self, i: usize) -> T {
        let Store::Spilled(s) = &self.slab.0 else {
            return self.slab[i].clone();
        };
        if !(self.from..self.from + self.block.len()).contains(&i) {
            let len = s.values().len();
            assert!(i < len, "index {i} out of a slab of {len}");
            let n = self.per_block.min(len - i).max(1);
            s.copy_block(i, n, &mut self.block);
            self.from = i;
        }
        self.block[i - self.from].clone()
    }
}

impl<T: Spillable> Deref for Slab<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.values(),
        }
    }
}

impl<T: Spillable> DerefMut for Slab<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.values_mut(),
        }
    }
}

impl<T: Spillable> Clone for Slab<T> {
    /// A held copy, wherever the values are: a rank is copied only to be
    /// given other ops (an export reads one rank's whole) or in tests.
    fn clone(&self) -> Self {
        Self(Store::Held(self.to_vec()))
    }
}

impl<T: Spillable + std::fmt::Debug> std::fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Equal when the values are, wherever they are kept.
impl<T: Spillable + PartialEq> PartialEq for Slab<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Spillable + Eq> Eq for Slab<T> {}

impl<T: Spillable> From<Vec<T>> for Slab<T> {
    fn from(v: Vec<T>) -> Self {
        Self(Store::Held(v))
    }
}

impl<T: Spillable> FromIterator<T> for Slab<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self(Store::Held(iter.into_iter().collect()))
    }
}

impl<'a, T: Spillable> IntoIterator for &'a Slab<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: Spillable> IntoIterator for &'a mut Slab<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// A [`Spill`] that keeps the values on the heap, behind the interface a
/// spilled slab has: what the tests of code reading spilled values use
/// below the store crate, whose file-backed spill is the real one.
pub struct Aside;

/// The one [`Aside`].
pub static ASIDE: Aside = Aside;

struct AsideValues<T>(Vec<T>);

impl<T: Clone + Send + Sync> Backing<T> for AsideValues<T> {
    fn values(&self) -> &[T] {
        &self.0
    }

    fn values_mut(&mut self) -> &mut [T] {
        &mut self.0
    }

    fn truncate(&mut self, n: usize) {
        self.0.truncate(n);
    }

    fn store(&self) -> &'static dyn Spill {
        &ASIDE
    }
}

fn aside<T: Clone + Send + Sync + 'static>(values: &[T]) -> std::io::Result<Box<dyn Backing<T>>> {
    Ok(Box::new(AsideValues(values.to_vec())))
}

impl Spill for Aside {
    fn ops(&self, values: &[DeviceOp]) -> std::io::Result<Box<dyn Backing<DeviceOp>>> {
        aside(values)
    }

    fn intervals(&self, values: &[Interval]) -> std::io::Result<Box<dyn Backing<Interval>>> {
        aside(values)
    }

    fn figures(&self, values: &[Figures]) -> std::io::Result<Box<dyn Backing<Figures>>> {
        aside(values)
    }

    fn indices(&self, values: &[u32]) -> std::io::Result<Box<dyn Backing<u32>>> {
        aside(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cut to its first values, held or spilled alike (a group's
    /// sequences are cut to the shortest rank's).
    #[test]
    fn a_slab_is_cut_where_it_is_kept() {
        let values: Vec<u32> = (0..5000).collect();
        let mut held = Slab::from(values.clone());
        let mut spilled = Slab::from(values);
        spilled.spill(&ASIDE).unwrap();
        for n in [6000, 4096, 3] {
            held.truncate(n);
            spilled.truncate(n);
            assert!(spilled.is_spilled() && !held.is_spilled());
            assert_eq!(held, spilled);
            assert_eq!(spilled.len(), n.min(5000));
        }
        assert_eq!(&spilled[..], &[0, 1, 2]);
        assert!(spilled.spilled_to().is_some() && held.spilled_to().is_none());
    }

    #[test]
    fn a_reader_reads_held_and_spilled_alike() {
        let values: Vec<u32> = (0..1000).map(|i| i * 7).collect();
        let held = Slab::from(values.clone());
        let mut spilled = Slab::from(values.clone());
        spilled.spill(&ASIDE).unwrap();
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
    fn no_values_are_not_spilled() {
        let mut o = Ops::default();
        o.spill(&ASIDE).unwrap();
        assert!(!o.is_spilled());
        assert!(o.is_empty());
    }
}
