//! What the tool takes from PyTorch execution traces (ET): the communication
//! nodes (`nccl:all_reduce`, …) with their message sizes, per rank. They give
//! collective counts and volumes where the profiler trace has no sizes, and a
//! cross-check where it does.

use std::path::PathBuf;

use super::classify::CollKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtColl {
    pub kind: CollKind,
    /// Bytes of the node's input tensors (numel × element size).
    pub bytes: u64,
}

#[derive(Debug, Clone, Default)]
pub struct EtRank {
    pub rank: u32,
    pub source: PathBuf,
    /// The ET `schema`, e.g. `1.0.1` or `1.1.1-chakra.0.0.4`.
    pub schema: String,
    /// In node order (the order the program issued them).
    pub colls: Vec<EtColl>,
}
