//! A matched collective's figures as held: plain values the spill interface
//! (`slab`) can name without the matching that makes them.

use super::classify::CollKind;
use super::time::Ns;

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
    pub kind: Option<CollKind>,
    /// Bit 0: `bytes` is known; bit 1: `data_bytes` is.
    pub sized: u8,
    /// Written as zeros: a plain value has no padding.
    pub pad: [u8; 6],
}
