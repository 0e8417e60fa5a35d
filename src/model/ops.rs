//! A rank's device ops, sorted by start: held in memory, or spilled to a
//! temporary file that the kernel pages in and out. A load spills the
//! collectives it keeps of a rank when the run's would not fit comfortably
//! in memory (see `load::HELD_COMM_OPS`): the cross-rank figures read every
//! rank's collectives in issue order, a few pages of each rank at a time,
//! so the kernel keeps in memory what it can spare and reads the rest back
//! from the file. The heap no longer grows with them; where memory is
//! shorter than they are, each pass over them reads the file again (slow,
//! but it completes).
//!
//! The crate's only unsafe code: a map read as a slice of ops. Each block
//! says why it is sound.
#![allow(unsafe_code)]

use std::io::Write;
use std::ops::{Deref, DerefMut};

use super::timeline::{Activity, PackedWork, Slot};
use super::{CollKind, DeviceOp, KernelClass, Ns, StrId};

/// Device ops, held or spilled; either way a slice (see the module).
#[derive(Default)]
pub struct Ops(Store);

enum Store {
    Held(Vec<DeviceOp>),
    Spilled(Spill),
}

impl Default for Store {
    fn default() -> Self {
        Self::Held(Vec::new())
    }
}

/// Ops in a file-backed map: `len` ops from its first byte.
struct Spill {
    map: memmap2::MmapMut,
    len: usize,
}

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
};

impl Spill {
    /// `ops` written to an unnamed temporary file (in `TMPDIR`), mapped.
    fn of(ops: &[DeviceOp]) -> std::io::Result<Self> {
        let mut file = tempfile::tempfile()?;
        // SAFETY: a DeviceOp has no padding (asserted above), so all of
        // the slice's bytes are initialised.
        let bytes = unsafe {
            std::slice::from_raw_parts(ops.as_ptr().cast::<u8>(), std::mem::size_of_val(ops))
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
            len: ops.len(),
        })
    }

    fn ops(&self) -> &[DeviceOp] {
        // SAFETY: the map is page-aligned (more than an op's alignment) and
        // holds `len` ops' bytes, written from valid ops and only ever
        // changed through `ops_mut`, as ops.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<DeviceOp>(), self.len) }
    }

    fn ops_mut(&mut self) -> &mut [DeviceOp] {
        // SAFETY: as in `ops`; the map is borrowed mutably, so uniquely.
        unsafe {
            std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast::<DeviceOp>(), self.len)
        }
    }
}

impl Ops {
    /// Moves the ops to a temporary file (see the module); none when there
    /// are none or they are already there. On an error (no temporary
    /// folder, a full disk) they stay held.
    pub fn spill(&mut self) -> std::io::Result<()> {
        let Store::Held(ops) = &self.0 else {
            return Ok(());
        };
        if ops.is_empty() {
            return Ok(());
        }
        self.0 = Store::Spilled(Spill::of(ops)?);
        Ok(())
    }

    pub fn is_spilled(&self) -> bool {
        matches!(self.0, Store::Spilled(_))
    }

    /// The ops as a vector to grow or cut: spilled ones are read back.
    pub fn vec_mut(&mut self) -> &mut Vec<DeviceOp> {
        if let Store::Spilled(s) = &self.0 {
            self.0 = Store::Held(s.ops().to_vec());
        }
        match &mut self.0 {
            Store::Held(v) => v,
            Store::Spilled(_) => unreachable!("read back above"),
        }
    }

    pub fn into_vec(self) -> Vec<DeviceOp> {
        match self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.ops().to_vec(),
        }
    }
}

impl Deref for Ops {
    type Target = [DeviceOp];

    fn deref(&self) -> &[DeviceOp] {
        match &self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.ops(),
        }
    }
}

impl DerefMut for Ops {
    fn deref_mut(&mut self) -> &mut [DeviceOp] {
        match &mut self.0 {
            Store::Held(v) => v,
            Store::Spilled(s) => s.ops_mut(),
        }
    }
}

impl Clone for Ops {
    /// A held copy, wherever the ops are: a rank is copied only to be given
    /// other ops (an export reads one rank's whole) or in tests.
    fn clone(&self) -> Self {
        Self(Store::Held(self.to_vec()))
    }
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Equal when the ops are, wherever they are kept.
impl PartialEq for Ops {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl From<Vec<DeviceOp>> for Ops {
    fn from(v: Vec<DeviceOp>) -> Self {
        Self(Store::Held(v))
    }
}

impl FromIterator<DeviceOp> for Ops {
    fn from_iter<I: IntoIterator<Item = DeviceOp>>(iter: I) -> Self {
        Self(Store::Held(iter.into_iter().collect()))
    }
}

impl<'a> IntoIterator for &'a Ops {
    type Item = &'a DeviceOp;
    type IntoIter = std::slice::Iter<'a, DeviceOp>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Ops {
    type Item = &'a mut DeviceOp;
    type IntoIter = std::slice::IterMut<'a, DeviceOp>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Activity, KernelClass, StrId};

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

    #[test]
    fn no_ops_are_not_spilled() {
        let mut o = Ops::default();
        o.spill().unwrap();
        assert!(!o.is_spilled());
        assert!(o.is_empty());
    }
}
