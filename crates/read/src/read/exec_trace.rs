//! PyTorch execution traces (ET JSON, schemas 1.0.1 to 1.1.1-chakra): only
//! communication nodes are kept. A node's `inputs` are a list (1.0.x) or an
//! object with `values` (chakra); a tensor value is
//! `[tensor id, storage id, offset, numel, element bytes, device]`, possibly
//! nested in lists for tensor-list arguments.

use crate::model::Warning;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::events::{again_warning, serde_message, walk, Sink};
use super::split::Pos;
use crate::error::Error;
use crate::model::classify::coll_kind;
use crate::model::exec_trace::{EtColl, EtRank};
use crate::model::timeline::MAX_MESSAGE_BYTES;

#[derive(Deserialize)]
struct Node<'a> {
    name: String,
    #[serde(borrow, default)]
    inputs: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    /// The node above (1.0.x); `ctrl_deps` in chakra schemas.
    #[serde(borrow, default)]
    parent: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ctrl_deps: Option<&'a RawValue>,
}

/// An integer field, whatever else a schema put there.
fn int(v: Option<&RawValue>) -> Option<i64> {
    v.and_then(|r| serde_json::from_str::<i64>(r.get()).ok())
}

/// The values of a node's `inputs`: the list itself (1.0.x) or its
/// `values` (chakra).
fn values(v: Value) -> Value {
    match v {
        Value::Object(mut o) => o.remove("values").unwrap_or(Value::Null),
        v => v,
    }
}

/// What a `record_param_comms` node says of its call: `[tensors, seq,
/// group, rank, name, in splits, out splits]` (1.0.x; the seq a plain
/// integer) or with `[seq, is p2p]`, `[pg name, desc]` and then global rank
/// start, stride and group size (1.1.x).
fn params(v: &Value) -> Params {
    let Value::Array(a) = v else {
        return Params::default();
    };
    if a.len() < 7 || !a[4].is_string() {
        return Params::default();
    }
    let seq = match &a[1] {
        Value::Array(t) => t.first().and_then(Value::as_u64),
        n => n.as_u64(),
    };
    let splits = a[5].as_array().map_or(0, Vec::len);
    let group = match a.get(9).and_then(Value::as_u64) {
        Some(n) if n > 0 => u32::try_from(n).ok(),
        _ => (splits > 0).then(|| u32::try_from(splits).ok()).flatten(),
    };
    // `[pg name, desc]` in 1.1.x; 1.0.x records an address, no name.
    let name = match &a[2] {
        Value::Array(t) => t.first().and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    Params { seq, group, name }
}

/// What a `record_param_comms` node says of its call.
#[derive(Debug, Clone, Default)]
struct Params {
    seq: Option<u64>,
    group: Option<u32>,
    name: Option<String>,
}

/// The element size every tensor value in `v` shares, if one.
fn elem_size(v: &Value) -> Option<u64> {
    fn each(v: &Value, out: &mut Vec<u64>) {
        match v {
            Value::Array(a) if a.len() == 6 && a[5].is_string() && a[3].is_u64() => {
                out.extend(a[4].as_u64());
            }
            Value::Array(a) => a.iter().for_each(|v| each(v, out)),
            _ => {}
        }
    }
    let mut sizes = Vec::new();
    each(v, &mut sizes);
    let first = *sizes.first()?;
    sizes.iter().all(|&s| s == first).then_some(first)
}

/// Sum of numel × element bytes over the tensor values in `v`; `None` when
/// a size is no real size (beyond [`MAX_MESSAGE_BYTES`] in all).
fn tensor_bytes(v: &Value) -> Option<u64> {
    let bytes = match v {
        Value::Array(a) if a.len() == 6 && a[5].is_string() && a[3].is_u64() => {
            a[3].as_u64()?.checked_mul(a[4].as_u64().unwrap_or(0))?
        }
        Value::Array(a) => a
            .iter()
            .try_fold(0u64, |sum, v| sum.checked_add(tensor_bytes(v)?))?,
        Value::Object(o) => o.get("values").map_or(Some(0), tensor_bytes)?,
        _ => 0,
    };
    (bytes <= MAX_MESSAGE_BYTES).then_some(bytes)
}

/// A communication node: `nccl:*`, `gloo:*` or `mpi:*` (the backend's record,
/// one per collective, not the `c10d::` wrapper above it).
fn is_comm(name: &str) -> bool {
    ["nccl:", "gloo:", "mpi:", "xccl:"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The communication nodes of one execution trace, as they stream by.
#[derive(Default)]
struct Nodes {
    schema: String,
    colls: Vec<EtColl>,
    nodes: u64,
    skipped: u64,
    first_skip: Option<(Pos, String)>,
    implausible: u64,
    saw_nodes: bool,
    again: Option<(Pos, u64)>,
    /// The node above each of `colls`.
    above: Vec<Option<i64>>,
    /// What each `record_param_comms` node said, by id.
    params: std::collections::HashMap<i64, Params>,
}

impl Sink for Nodes {
    /// A communication node, or `None` for any other node.
    type Event = Option<(EtColl, Option<i64>)>;
    const EVENTS: &'static str = "nodes";

    fn parse(
        &mut self,
        raw: &[u8],
    ) -> Result<Option<Option<(EtColl, Option<i64>)>>, serde_json::Error> {
        let node: Node = serde_json::from_slice(raw)?;
        let inputs = || {
            node.inputs
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                .map(values)
        };
        if node.name == "record_param_comms" {
            if let (Some(id), Some(v)) = (int(node.id), inputs()) {
                self.params.insert(id, params(&v));
            }
            return Ok(Some(None));
        }
        if !is_comm(&node.name) {
            return Ok(Some(None));
        }
        let v = inputs();
        let bytes = v.as_ref().map_or(Some(0), tensor_bytes);
        if bytes.is_none() {
            self.implausible += 1;
        }
        // The backend's node sits under the record_param_comms of its call,
        // which the file may hold later: looked up at the end.
        let above = int(node.parent).or(int(node.ctrl_deps));
        Ok(Some(Some((
            EtColl {
                kind: coll_kind(&node.name),
                bytes: bytes.unwrap_or(0),
                elem_size: v.as_ref().and_then(elem_size),
                seq: None,
                group: None,
                group_name: None,
            },
            above,
        ))))
    }

    fn take(
        &mut self,
        parsed: Result<Option<Option<(EtColl, Option<i64>)>>, serde_json::Error>,
        start: impl FnOnce() -> Pos,
    ) {
        match parsed {
            Ok(Some(coll)) => {
                self.nodes += 1;
                if let Some((coll, above)) = coll {
                    self.colls.push(coll);
                    self.above.push(above);
                }
            }
            Ok(None) => self.skipped += 1,
            Err(e) => {
                self.skipped += 1;
                if self.first_skip.is_none() {
                    self.first_skip = Some((start().advanced_to(&e), serde_message(&e)));
                }
            }
        }
    }

    fn wants(&self, key: &str) -> bool {
        key == "schema"
    }

    fn member(&mut self, _key: &str, raw: &[u8], _at: Pos) {
        self.schema = serde_json::from_slice(raw).unwrap_or_default();
    }

    fn saw_events(&mut self) {
        self.saw_nodes = true;
    }

    fn events_again(&mut self, at: Pos) {
        self.again = Some((at, self.nodes));
        self.colls.clear();
        self.above.clear();
        self.params.clear();
        (self.nodes, self.skipped, self.implausible) = (0, 0, 0);
        self.first_skip = None;
    }
}

/// Reads one execution trace from `reader` (already decompressed), streaming
/// its nodes; a damaged file is read as far as it is valid, with a warning.
pub fn read(reader: impl Read, path: &Path) -> Result<(EtRank, Vec<Warning>), Error> {
    let mut n = Nodes::default();
    let mut warnings = walk(reader, &mut n, path, "a PyTorch execution trace", |n| {
        n.nodes
    })?;
    if n.nodes == 0 && n.skipped > 0 {
        let why = n
            .first_skip
            .as_ref()
            .map_or(String::new(), |(at, msg)| format!(" (at {at}: {msg})"));
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: format!("no node of its \"nodes\" is an execution trace node{why}"),
        });
    }
    if warnings.is_empty() && !n.saw_nodes {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "JSON without a \"nodes\" array, so not a PyTorch execution trace".into(),
        });
    }
    if let Some((at, dropped)) = n.again {
        warnings.push(again_warning(path, at, dropped));
    }
    for (c, above) in n.colls.iter_mut().zip(&n.above) {
        if let Some(p) = above.and_then(|a| n.params.get(&a)) {
            (c.seq, c.group, c.group_name) = (p.seq, p.group, p.name.clone());
        }
    }
    if n.skipped > 0 {
        let first = n.first_skip.as_ref().map_or(String::new(), |(at, msg)| {
            format!("; the first at {at}: {msg}")
        });
        warnings.push(Warning::damaged(format!(
            "{}: skipped {} node(s) that are not execution trace nodes{first}",
            path.display(),
            n.skipped
        )));
    }
    if n.implausible > 0 {
        warnings.push(Warning::ignored(format!(
            "{}: {} communication node(s) with a tensor size that is no real size (over 1 TiB); their bytes are left out",
            path.display(),
            n.implausible
        )));
    }
    Ok((
        EtRank {
            rank: 0,
            source: path.to_owned(),
            schema: n.schema,
            colls: n.colls,
        },
        warnings,
    ))
}

/// The rank in an execution trace's file name: `torch_et_3.json`,
/// `dlrm_eg_3.json`, `rank3_et.json`.
pub(crate) fn rank_of(path: &std::path::Path) -> Option<u32> {
    static TRAILING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[-_]([0-9]+)\.json(?:\.gz)?$").expect("valid regex")
    });
    crate::naming::rank_from_name(path).or_else(|| {
        let name = path.file_name()?.to_str()?;
        TRAILING.captures(name)?[1].parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CollKind;

    #[test]
    fn both_input_layouts() {
        // 1.0.1: inputs are the values; chakra: {"values": ...}. A tensor list
        // (all_to_all of two tensors) sums; the c10d wrapper is not counted.
        let doc = br#"{"schema": "1.0.1", "nodes": [
            {"name": "c10d::allreduce_", "inputs": [[1, 2, 0, 100, 4, "cuda:0"]]},
            {"name": "nccl:all_reduce", "inputs": [[1, 2, 0, 100, 4, "cuda:0"]]},
            {"name": "nccl:all_to_all", "inputs": {"values": [[[3, 4, 0, 10, 2, "cuda:0"], [5, 6, 0, 5, 8, "cuda:0"]]]}},
            {"name": "aten::mm", "inputs": [[7, 8, 0, 9, 4, "cuda:0"]]}
        ]}"#;
        let (et, warnings) = read(&doc[..], Path::new("et.json")).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(et.schema, "1.0.1");
        assert_eq!(
            et.colls,
            vec![
                EtColl {
                    kind: CollKind::AllReduce,
                    bytes: 400,
                    elem_size: Some(4),
                    seq: None,
                    group: None,
                    group_name: None,
                },
                // Elements of 2 and 8 bytes: no one element size.
                EtColl::sized(CollKind::AllToAll, 60),
            ]
        );
        let bad = read(&b"{\"nodes\": ["[..], Path::new("et.json")).unwrap_err();
        assert!(bad.to_string().contains("et.json"), "{bad}");
    }

    /// The call's `record_param_comms` above each backend node gives its
    /// sequence number and group, in both layouts (nodes as the DLRM 1.0.1
    /// and the chakra 1.1.1 corpus traces write them).
    #[test]
    fn sequence_numbers_and_groups_from_the_call_above() {
        let doc = br#"{"schema": "1.0.1", "nodes": [
            {"name": "record_param_comms", "id": 605, "parent": 604, "inputs": [[718, 715, 0, 6144, 4, "cuda:0"], 147, 94594108284448, 0, "all_to_allv", [768, 768, 768, 768, 768, 768, 768, 768], [768, 768, 768, 768, 768, 768, 768, 768]]},
            {"name": "nccl:all_to_all", "id": 606, "parent": 605, "inputs": [[718, 715, 0, 6144, 4, "cuda:0"]]},
            {"name": "record_param_comms", "id": 700, "parent": 604, "inputs": [[[1244, 1156, 0, 394241, 4, "cuda:0"]], 151, 94594108284448, 0, "allreduce", [], []]},
            {"name": "nccl:all_reduce", "id": 701, "parent": 700, "inputs": [[1244, 1156, 0, 394241, 4, "cuda:0"]]}
        ]}"#;
        let (et, _) = read(&doc[..], Path::new("dlrm_eg_0.json")).unwrap();
        let got = |c: &EtColl| (c.bytes, c.elem_size, c.seq, c.group);
        assert_eq!(got(&et.colls[0]), (24_576, Some(4), Some(147), Some(8)));
        assert_eq!(got(&et.colls[1]), (1_576_964, Some(4), Some(151), None));
        let doc = br#"{"schema": "1.1.1-chakra.0.0.4", "nodes": [
            {"id": 1495, "name": "record_param_comms", "ctrl_deps": 1494, "inputs": {"values": [[[1493, 104, 0, 196608, 4, "cuda:0"]], [49, false], ["0", "default_pg"], 0, "allreduce", [], [], 0, 1, 2], "types": []}},
            {"id": 1496, "name": "nccl:all_reduce", "ctrl_deps": 1495, "inputs": {"values": [[1493, 104, 0, 196608, 4, "cuda:0"]], "types": ["Tensor(float)"]}}
        ]}"#;
        let (et, _) = read(&doc[..], Path::new("et.json")).unwrap();
        let c = &et.colls[0];
        assert_eq!(
            (c.bytes, c.elem_size, c.seq, c.group),
            (786_432, Some(4), Some(49), Some(2))
        );
        assert_eq!(c.group_name.as_deref(), Some("0"));
    }

    #[test]
    fn sizes_beyond_a_tebibyte_and_damaged_nodes_are_left_out() {
        // numel × element bytes past 2^64, and one past 1 TiB: no bytes, a warning.
        let doc = br#"{"nodes": [
            {"name": "nccl:all_reduce", "inputs": [[1, 2, 0, 18446744073709551615, 4, "cuda:0"]]},
            {"name": "nccl:all_gather", "inputs": [[1, 2, 0, 1099511627776, 2, "cuda:0"]]},
            {"name": "nccl:broadcast", "inputs": [[1, 2, 0, 8, 4, "cuda:0"]], "x": tru},
            {"name": "nccl:all_to_all", "inputs": [[1, 2, 0, 8, 4, "cuda:0"]]}
        ], "schema": "1.1.1-chakra"}"#;
        let (et, warnings) = read(&doc[..], Path::new("et.json")).unwrap();
        assert_eq!(et.schema, "1.1.1-chakra");
        let bytes: Vec<u64> = et.colls.iter().map(|c| c.bytes).collect();
        assert_eq!(bytes, [0, 0, 32]);
        assert!(
            warnings[0].text.contains(
                "skipped 1 node(s) that are not execution trace nodes; the first at line 4"
            ),
            "{warnings:?}"
        );
        assert!(
            warnings[1]
                .text
                .contains("2 communication node(s) with a tensor size that is no real size"),
            "{warnings:?}"
        );
        assert_eq!(warnings[1].kind, crate::model::warning::Kind::Ignored);
        // Cut inside the last node: the nodes before it are read.
        let cut = &doc[..doc.len() - 60];
        let (et, warnings) = read(cut, Path::new("et.json")).unwrap();
        assert_eq!(et.colls.len(), 2);
        assert!(
            warnings[0].text.contains("cut off or damaged"),
            "{warnings:?}"
        );
        assert_eq!(warnings[0].kind, crate::model::warning::Kind::Damaged);
    }
}
