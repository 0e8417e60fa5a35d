//! Values spilled to a temporary file that the kernel pages in and out: a
//! rank's device ops, its exposed-communication intervals, the run's
//! collective sequences and rows (the model's `slab::Spill`). A load spills
//! what it keeps of a rank's collectives when the run's would not fit
//! comfortably in memory (see `load::HELD_COMM_OPS`): the cross-rank figures
//! read every rank's collectives in issue order, a block of each rank's at
//! a time (the model's `slab::Reader`, which asks for each block with
//! `MADV_WILLNEED`), so the kernel keeps in memory what it can spare and
//! reads the rest back from the file. The heap no longer grows with them;
//! where memory is shorter than they are, each pass over them reads the
//! file again, in blocks.
//!
//! The project's only unsafe code: a value written as its bytes, and a map
//! read as a slice of values. Each block says why it is sound.
#![allow(unsafe_code)]

use std::io::Write;

use crate::model::collectives::Figures;
use crate::model::slab::{Backing, Spill};
use crate::model::{
    Activity, CollKind, DeviceOp, Interval, KernelClass, Ns, PackedWork, Slot, StrId,
};

/// A value that can be written to a file as its bytes and read back from
/// them.
///
/// # Safety
/// Every byte of a value must be initialised (no padding), and bytes
/// written from a valid value must read back as that value.
unsafe trait Plain: Clone + Send + Sync + 'static {}

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

/// Spills to unnamed temporary files (in `TMPDIR`), one per slab.
pub struct TempFiles;

/// The one [`TempFiles`]: what a load hands the slabs it spills.
pub static TEMP_FILES: TempFiles = TempFiles;

impl Spill for TempFiles {
    fn ops(&self, values: &[DeviceOp]) -> std::io::Result<Box<dyn Backing<DeviceOp>>> {
        Ok(Box::new(Mapped::of(values)?))
    }

    fn intervals(&self, values: &[Interval]) -> std::io::Result<Box<dyn Backing<Interval>>> {
        Ok(Box::new(Mapped::of(values)?))
    }

    fn figures(&self, values: &[Figures]) -> std::io::Result<Box<dyn Backing<Figures>>> {
        Ok(Box::new(Mapped::of(values)?))
    }

    fn indices(&self, values: &[u32]) -> std::io::Result<Box<dyn Backing<u32>>> {
        Ok(Box::new(Mapped::of(values)?))
    }
}

/// Values in a file-backed map: `len` of them from its first byte.
struct Mapped<T> {
    map: memmap2::MmapMut,
    len: usize,
    of: std::marker::PhantomData<T>,
}

impl<T: Plain> Mapped<T> {
    /// `values` written to an unnamed temporary file, mapped.
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
}

impl<T: Plain> Backing<T> for Mapped<T> {
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

    fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    fn copy_block(&self, from: usize, n: usize, out: &mut Vec<T>) {
        let size = std::mem::size_of::<T>();
        // A hint: on an error the copy faults the pages in as before.
        let _ = self
            .map
            .advise_range(memmap2::Advice::WillNeed, from * size, n * size);
        out.clear();
        out.extend_from_slice(&self.values()[from..from + n]);
    }

    fn store(&self) -> &'static dyn Spill {
        &TEMP_FILES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::slab::{Ops, Slab};

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
                op.work = Some(crate::model::Work::Bytes(1 << 20)).into();
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
        o.spill(&TEMP_FILES).unwrap();
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

    /// Cut, and read in blocks, from the file as from memory.
    #[test]
    fn a_spilled_slab_is_cut_and_read_in_blocks() {
        let values: Vec<u32> = (0..5000).map(|i| i * 7).collect();
        let mut spilled = Slab::from(values.clone());
        spilled.spill(&TEMP_FILES).unwrap();
        let mut r = spilled.reader(256);
        for i in (0..5000).step_by(3).chain([4999, 5, 6, 700, 0]) {
            assert_eq!(r.get(i), values[i], "value {i}");
        }
        spilled.truncate(3);
        assert!(spilled.is_spilled());
        assert_eq!(&spilled[..], &[0, 7, 14]);
        let mut f = Slab::from(vec![Interval::new(Ns(1), Ns(4)); 3]);
        f.spill(&TEMP_FILES).unwrap();
        assert_eq!(f[2], Interval::new(Ns(1), Ns(4)));
    }
}
