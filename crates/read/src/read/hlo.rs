//! XLA's HLO module dumps (`module_0012.jit_train_step.….after_optimizations
//! .hlo.pb.xz`, an xz-compressed `HloProto`), as nsys-jax archives keep
//! them: what each instruction of a compiled program is (its opcode) and,
//! for a collective, the sizes it moves and its group. Decoded with prost
//! from the fields of the public `hlo.proto` / `xla_data.proto` schemas
//! this needs; the others are skipped.

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use crate::model::classify::CollKind;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct HloProto {
    #[prost(message, optional, tag = "1")]
    hlo_module: Option<HloModuleProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct HloModuleProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, repeated, tag = "3")]
    computations: Vec<HloComputationProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct HloComputationProto {
    #[prost(message, repeated, tag = "2")]
    instructions: Vec<HloInstructionProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct HloInstructionProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    opcode: String,
    #[prost(message, optional, tag = "3")]
    shape: Option<ShapeProto>,
    #[prost(string, tag = "11")]
    fusion_kind: String,
    #[prost(string, tag = "28")]
    custom_call_target: String,
    #[prost(int64, tag = "35")]
    id: i64,
    #[prost(int64, repeated, tag = "36")]
    operand_ids: Vec<i64>,
    #[prost(message, repeated, tag = "49")]
    replica_groups: Vec<ReplicaGroup>,
    #[prost(message, optional, tag = "87")]
    collective_device_list: Option<CollectiveDeviceListProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ShapeProto {
    #[prost(int32, tag = "2")]
    element_type: i32,
    #[prost(int64, repeated, tag = "3")]
    dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "4")]
    tuple_shapes: Vec<ShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ReplicaGroup {
    #[prost(int64, repeated, tag = "1")]
    replica_ids: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct CollectiveDeviceListProto {
    #[prost(message, repeated, tag = "1")]
    replica_groups: Vec<ReplicaGroup>,
    #[prost(message, optional, tag = "2")]
    iota_replica_group_list: Option<IotaReplicaGroupListProto>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct IotaReplicaGroupListProto {
    #[prost(int64, tag = "2")]
    num_devices_per_group: i64,
}

/// One instruction of a compiled program, as much as the timeline needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instr {
    pub opcode: String,
    /// For a collective: its kind and sizes.
    pub coll: Option<Coll>,
    /// What a `custom-call` calls (`__cublas$lt$matmul`, `__cudnn$fmha…`)
    /// or what kind a `fusion` is (`kLoop`, `kInput`, `kCustom`); empty for
    /// other opcodes.
    pub target: String,
}

/// What a collective instruction moves, per member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coll {
    pub kind: CollKind,
    /// Elements of its operands, and of its result (an async start's, the
    /// result of its `-done`).
    pub in_elems: Option<u64>,
    pub out_elems: Option<u64>,
    /// Bytes per element, where every array has the same.
    pub elem_bytes: Option<u64>,
    pub group: Option<u32>,
}

/// The kind of collective an HLO opcode is (`all-gather-start` too); `None`
/// for every other opcode.
pub(crate) fn coll_of(opcode: &str) -> Option<CollKind> {
    let base = opcode
        .strip_suffix("-start")
        .or_else(|| opcode.strip_suffix("-done"))
        .unwrap_or(opcode);
    Some(match base {
        "all-reduce" => CollKind::AllReduce,
        "all-gather" => CollKind::AllGather,
        "reduce-scatter" => CollKind::ReduceScatter,
        "all-to-all" | "ragged-all-to-all" => CollKind::AllToAll,
        "collective-permute" | "send" | "recv" => CollKind::SendRecv,
        "collective-broadcast" => CollKind::Broadcast,
        _ => return None,
    })
}

/// Bytes of one element of XLA's `PrimitiveType`; `None` for sub-byte,
/// tuple, token and unknown types.
fn elem_bytes(t: i32) -> Option<u64> {
    Some(match t {
        1 | 2 | 6 | 19 | 20 | 23 | 24 | 25 | 28 | 29 | 33 => 1, // PRED, S8, U8, F8*
        3 | 7 | 10 | 16 => 2,                                   // S16, U16, F16, BF16
        4 | 8 | 11 => 4,                                        // S32, U32, F32
        5 | 9 | 12 | 15 => 8,                                   // S64, U64, F64, C64
        18 => 16,                                               // C128
        _ => return None,
    })
}

/// The arrays of a shape (a tuple's leaves), as (elements, bytes each).
fn arrays(s: &ShapeProto, out: &mut Vec<(Option<u64>, Option<u64>)>, depth: u32) {
    if !s.tuple_shapes.is_empty() && depth < 16 {
        for t in &s.tuple_shapes {
            arrays(t, out, depth + 1);
        }
        return;
    }
    if s.element_type == 13 || s.element_type == 17 {
        return; // an empty tuple, a token
    }
    let elems = s
        .dimensions
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?));
    out.push((elems, elem_bytes(s.element_type)));
}

/// Total elements and the common element size of `shapes`' arrays.
fn measure<'a>(shapes: impl Iterator<Item = &'a ShapeProto>) -> (Option<u64>, Option<u64>) {
    let mut all = Vec::new();
    for s in shapes {
        arrays(s, &mut all, 0);
    }
    let elems = all.iter().try_fold(0u64, |n, (e, _)| n.checked_add((*e)?));
    let first = all.first().and_then(|a| a.1);
    let same = first.filter(|&b| all.iter().all(|a| a.1 == Some(b)));
    (elems.filter(|_| !all.is_empty()), same)
}

/// The most an HLO dump may unpack to: 100 times its compressed size, at
/// least 64 MiB and at most 1 GiB (a real dump packs about 10 to 1).
fn max_dump(packed: usize) -> u64 {
    (packed as u64).saturating_mul(100).clamp(64 << 20, 1 << 30)
}

/// A writer that refuses bytes past `left`.
pub(crate) struct Bounded {
    out: Vec<u8>,
    left: u64,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(std::io::Error::other(
                "over the size an HLO dump is read to",
            ));
        }
        self.left -= buf.len() as u64;
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The instructions of one dumped module by name, from its bytes (xz when
/// `xz`); the module's name too.
pub(crate) fn module(bytes: &[u8], xz: bool) -> Result<(String, HashMap<String, Instr>), String> {
    let raw;
    let proto = if xz {
        let mut out = Bounded {
            out: Vec::new(),
            left: max_dump(bytes.len()),
        };
        lzma_rs::xz_decompress(&mut std::io::BufReader::new(bytes), &mut out)
            .map_err(|e| format!("not xz-compressed as its name says: {e}"))?;
        raw = out.out;
        &raw[..]
    } else {
        bytes
    };
    let hlo = HloProto::decode(proto).map_err(|e| format!("not an HloProto: {e}"))?;
    let m = hlo.hlo_module.ok_or("an HloProto without a module")?;
    let mut out = HashMap::new();
    for c in &m.computations {
        let by_id: HashMap<i64, &HloInstructionProto> =
            c.instructions.iter().map(|i| (i.id, i)).collect();
        // An async start's result is its `-done`'s (the start's own is a
        // tuple of operands, results and scratch).
        let mut done_of: HashMap<i64, &HloInstructionProto> = HashMap::new();
        for i in c
            .instructions
            .iter()
            .filter(|i| i.opcode.ends_with("-done"))
        {
            if let Some(&start) = i.operand_ids.first() {
                done_of.insert(start, i);
            }
        }
        for i in &c.instructions {
            let coll = coll_of(&i.opcode)
                .filter(|_| !i.opcode.ends_with("-done"))
                .map(|kind| {
                    let operands = i.operand_ids.iter().filter_map(|o| by_id.get(o));
                    let (in_elems, in_bytes) = measure(operands.filter_map(|o| o.shape.as_ref()));
                    let result = if i.opcode.ends_with("-start") {
                        done_of.get(&i.id).and_then(|d| d.shape.as_ref())
                    } else {
                        i.shape.as_ref()
                    };
                    let (out_elems, out_bytes) = measure(result.into_iter());
                    Coll {
                        kind,
                        in_elems,
                        out_elems,
                        elem_bytes: in_bytes.filter(|&b| out_bytes.is_none_or(|o| o == b)),
                        group: group_size(i),
                    }
                });
            out.insert(
                i.name.clone(),
                Instr {
                    opcode: i.opcode.clone(),
                    coll,
                    target: if i.opcode == "custom-call" {
                        i.custom_call_target.clone()
                    } else {
                        i.fusion_kind.clone()
                    },
                },
            );
        }
    }
    Ok((m.name, out))
}

/// Members of each of the instruction's groups (the first group's; the
/// iota list's count), where it states them.
fn group_size(i: &HloInstructionProto) -> Option<u32> {
    let list = i.collective_device_list.as_ref();
    let groups = list
        .map(|l| &l.replica_groups)
        .filter(|g| !g.is_empty())
        .unwrap_or(&i.replica_groups);
    let n = match groups.first() {
        Some(g) => g.replica_ids.len() as i64,
        None => {
            list?
                .iota_replica_group_list
                .as_ref()?
                .num_devices_per_group
        }
    };
    u32::try_from(n).ok().filter(|&n| n > 0)
}

#[cfg(test)]
pub(crate) mod write {
    //! Dumps for tests: the same messages, encoded.
    use super::*;

    /// An array shape of `element_type` and `dims`.
    pub(crate) fn array(element_type: i32, dims: &[i64]) -> ShapeProto {
        ShapeProto {
            element_type,
            dimensions: dims.to_vec(),
            tuple_shapes: Vec::new(),
        }
    }

    pub(crate) fn tuple(parts: Vec<ShapeProto>) -> ShapeProto {
        ShapeProto {
            element_type: 13,
            dimensions: Vec::new(),
            tuple_shapes: parts,
        }
    }

    /// An instruction: name, opcode, shape, id, operands, group size.
    pub(crate) fn instr(
        name: &str,
        opcode: &str,
        shape: ShapeProto,
        id: i64,
        operands: &[i64],
        group: Option<usize>,
    ) -> HloInstructionProto {
        HloInstructionProto {
            name: name.into(),
            opcode: opcode.into(),
            shape: Some(shape),
            id,
            operand_ids: operands.to_vec(),
            replica_groups: Vec::new(),
            fusion_kind: String::new(),
            custom_call_target: String::new(),
            collective_device_list: group.map(|n| CollectiveDeviceListProto {
                replica_groups: vec![ReplicaGroup {
                    replica_ids: (0..n as i64).collect(),
                }],
                iota_replica_group_list: None,
            }),
        }
    }

    /// A custom call to `target`, or a fusion of kind `target`.
    pub(crate) fn calling(mut i: HloInstructionProto, target: &str) -> HloInstructionProto {
        if i.opcode == "custom-call" {
            i.custom_call_target = target.into();
        } else {
            i.fusion_kind = target.into();
        }
        i
    }

    /// PAX's FSDP all-gather (a bf16 shard of 205,168,720 elements over 4
    /// devices): its parameter (id 1), start (2) and done (3).
    pub(crate) fn pax_all_gather() -> Vec<HloInstructionProto> {
        const BF16: i32 = 16;
        let (shard, whole) = (array(BF16, &[205_168_720]), array(BF16, &[820_674_880]));
        vec![
            instr("param.1", "parameter", shard.clone(), 1, &[], None),
            instr(
                "all-gather-start.3",
                "all-gather-start",
                tuple(vec![shard, whole.clone()]),
                2,
                &[1],
                Some(4),
            ),
            instr("all-gather-done.3", "all-gather-done", whole, 3, &[2], None),
        ]
    }

    /// A module of one computation, xz-compressed as XLA dumps it.
    pub(crate) fn dump(name: &str, instructions: Vec<HloInstructionProto>) -> Vec<u8> {
        let proto = HloProto {
            hlo_module: Some(HloModuleProto {
                name: name.into(),
                computations: vec![HloComputationProto { instructions }],
            }),
        };
        let raw = proto.encode_to_vec();
        let mut out = Vec::new();
        lzma_rs::xz_compress(&mut std::io::BufReader::new(&raw[..]), &mut out).expect("xz");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::write::*;
    use super::*;

    /// PAX's FSDP all-gather of a bf16 shard of 205,168,720 elements over 4
    /// devices (410,337,440 B per rank, as JAX-Toolbox's loader gives it),
    /// async; an all-reduce of two f32 arrays; a fusion.
    #[test]
    fn collectives_have_their_sizes_and_groups() {
        const F32: i32 = 11;
        let mut instrs = pax_all_gather();
        instrs.extend([
            instr("p.4", "parameter", array(F32, &[8, 16]), 4, &[], None),
            instr("p.5", "parameter", array(F32, &[32]), 5, &[], None),
            instr(
                "all-reduce.6",
                "all-reduce",
                tuple(vec![array(F32, &[8, 16]), array(F32, &[32])]),
                6,
                &[4, 5],
                Some(8),
            ),
            instr("fusion.7", "fusion", array(F32, &[8]), 7, &[4], None),
        ]);
        let dump = dump("pjit__wrapped_step_fn", instrs);
        let (name, m) = module(&dump, true).unwrap();
        assert_eq!(name, "pjit__wrapped_step_fn");
        let ag = m["all-gather-start.3"].coll.unwrap();
        assert_eq!(ag.kind, CollKind::AllGather);
        assert_eq!(
            (ag.in_elems, ag.out_elems, ag.elem_bytes, ag.group),
            (Some(205_168_720), Some(820_674_880), Some(2), Some(4))
        );
        assert_eq!(ag.in_elems.unwrap() * ag.elem_bytes.unwrap(), 410_337_440);
        let ar = m["all-reduce.6"].coll.unwrap();
        assert_eq!(
            (ar.kind, ar.in_elems, ar.out_elems, ar.elem_bytes, ar.group),
            (CollKind::AllReduce, Some(160), Some(160), Some(4), Some(8))
        );
        assert_eq!(m["fusion.7"].coll, None);
        assert_eq!(m["all-gather-done.3"].coll, None);
        assert_eq!(m["fusion.7"].opcode, "fusion");
        // Damaged dumps are named errors.
        assert!(module(b"not xz", true).unwrap_err().contains("not xz"));
        assert!(module(b"\xff\xff\xff", false)
            .unwrap_err()
            .contains("HloProto"));
    }
}
