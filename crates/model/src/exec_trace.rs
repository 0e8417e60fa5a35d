//! What the tool takes from PyTorch execution traces (ET): the communication
//! nodes (`nccl:all_reduce`, …) with their message sizes, per rank. They give
//! collective counts and volumes where the profiler trace has no sizes, and a
//! cross-check where it does.

use std::path::PathBuf;

use super::classify::CollKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtColl {
    pub kind: CollKind,
    /// Bytes of the node's input tensors (numel × element size).
    pub bytes: u64,
    /// Bytes per element, where every input tensor has the same.
    pub elem_size: Option<u64>,
    /// The process group's collective sequence number its
    /// `record_param_comms` gives: equal on every member of one call.
    pub seq: Option<u64>,
    /// Members of the group: the group size `record_param_comms` states,
    /// else the number of split sizes of an all-to-all-v.
    pub group: Option<u32>,
    /// The process group's name (`pg_name`, "0" for the default group),
    /// where `record_param_comms` states it (1.1.x).
    pub group_name: Option<String>,
}

impl EtColl {
    /// A node of `kind` moving `bytes`, nothing else known of it.
    pub fn sized(kind: CollKind, bytes: u64) -> Self {
        Self {
            kind,
            bytes,
            elem_size: None,
            seq: None,
            group: None,
            group_name: None,
        }
    }
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

/// Whether a kernel's collective kind and an ET node's can be one call:
/// the same, either unknown, or an all-to-all NCCL runs as send/recv kernels.
fn compatible(kernel: Option<CollKind>, node: CollKind) -> bool {
    match kernel {
        None | Some(CollKind::Unknown) => true,
        Some(k) => {
            k == node
                || node == CollKind::Unknown
                || (k == CollKind::SendRecv && node == CollKind::AllToAll)
        }
    }
}

/// What [`link_sizes`] did to one rank.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Linked {
    /// Communication kernels that got a size.
    pub kernels: usize,
    /// Steps whose sizeless communication kernels are not the ET's nodes
    /// one for one: (step number, their count); none linked in them.
    pub unmatched: Vec<(i64, usize)>,
}

/// Gives `t`'s communication kernels that carry no message size the sizes
/// of `et`'s communication nodes, linked in order. The ET records one
/// iteration, so each step's sizeless communication kernels (those it
/// launched; the whole trace's without steps) must be its nodes one for
/// one, each of a compatible kind, or none of that step's is linked. A
/// linked kernel also takes the node's kind where its own name did not
/// tell it (unknown, or the send/recv kernels of an all-to-all).
pub fn link_sizes(t: &mut super::RankTimeline, et: &EtRank) -> Linked {
    let mut out = Linked::default();
    if et.colls.is_empty() || et.colls.iter().all(|c| c.bytes == 0) {
        return out;
    }
    let mut by_step: std::collections::BTreeMap<Option<u32>, Vec<usize>> = Default::default();
    for (i, o) in t.ops.iter().enumerate() {
        let sized = t.coll_meta(o).and_then(|m| m.in_bytes()).is_some();
        if o.is_kernel() && o.is_comm() && !sized {
            by_step.entry(o.step.get()).or_default().push(i);
        }
    }
    for (step, mut idx) in by_step {
        // Launched outside every step: no iteration to line up with.
        if step.is_none() && !t.steps.is_empty() {
            continue;
        }
        idx.sort_by_key(|&i| (t.ops[i].start, i));
        let lines_up = idx.len() == et.colls.len()
            && idx
                .iter()
                .zip(&et.colls)
                .all(|(&i, c)| compatible(t.ops[i].coll, c.kind));
        if !lines_up {
            let number = step.map_or(0, |s| t.steps[s as usize].number);
            out.unmatched.push((number, idx.len()));
            continue;
        }
        for (&i, c) in idx.iter().zip(&et.colls) {
            if c.bytes == 0 {
                continue;
            }
            let op = t.ops[i].clone();
            let kind = match op.coll {
                Some(k) if k != CollKind::Unknown && k != CollKind::SendRecv => k,
                _ => c.kind,
            };
            let mut meta = t
                .coll_meta(&op)
                .cloned()
                .unwrap_or_else(|| super::CollMeta {
                    kind,
                    name: t.strings.intern(kind.name()),
                    in_nelems: None,
                    out_nelems: None,
                    dtype_size: None,
                    group_size: None,
                    pg_name: None,
                    pg_ranks: None,
                    seq: None,
                    peer: None,
                });
            // Elements of the node's element size; bytes as one-byte
            // elements where the tensors' element sizes differ.
            match c.elem_size.filter(|&e| e > 0 && c.bytes % e == 0) {
                Some(e) => {
                    meta.in_nelems = Some(c.bytes / e);
                    meta.dtype_size = Some(e);
                }
                None => {
                    meta.in_nelems = Some(c.bytes);
                    meta.dtype_size = Some(1);
                }
            }
            meta.group_size = meta.group_size.or(c.group);
            meta.seq = meta.seq.or(c.seq);
            if meta.pg_name.is_none() {
                meta.pg_name = c.group_name.as_deref().map(|n| t.strings.intern(n));
            }
            meta.kind = kind;
            t.colls.push(meta);
            let slot = super::Slot::from(Some((t.colls.len() - 1) as u32));
            let o = &mut t.ops[i];
            o.meta = slot;
            o.coll = Some(kind);
            out.kernels += 1;
        }
    }
    out
}
