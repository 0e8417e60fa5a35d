//! PyTorch execution traces (ET JSON, schemas 1.0.1 to 1.1.1-chakra): only
//! communication nodes are kept. A node's `inputs` are a list (1.0.x) or an
//! object with `values` (chakra); a tensor value is
//! `[tensor id, storage id, offset, numel, element bytes, device]`, possibly
//! nested in lists for tensor-list arguments.

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
}

impl Sink for Nodes {
    /// A communication node, or `None` for any other node.
    type Event = Option<EtColl>;
    const EVENTS: &'static str = "nodes";

    fn parse(&mut self, raw: &[u8]) -> Result<Option<Option<EtColl>>, serde_json::Error> {
        let node: Node = serde_json::from_slice(raw)?;
        if !is_comm(&node.name) {
            return Ok(Some(None));
        }
        let bytes = match node.inputs {
            None => Some(0),
            Some(raw) => serde_json::from_str::<Value>(raw.get())
                .ok()
                .map_or(Some(0), |v| tensor_bytes(&v)),
        };
        if bytes.is_none() {
            self.implausible += 1;
        }
        Ok(Some(Some(EtColl {
            kind: coll_kind(&node.name),
            bytes: bytes.unwrap_or(0),
        })))
    }

    fn take(
        &mut self,
        parsed: Result<Option<Option<EtColl>>, serde_json::Error>,
        start: impl FnOnce() -> Pos,
    ) {
        match parsed {
            Ok(Some(coll)) => {
                self.nodes += 1;
                self.colls.extend(coll);
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
        (self.nodes, self.skipped, self.implausible) = (0, 0, 0);
        self.first_skip = None;
    }
}

/// Reads one execution trace from `reader` (already decompressed), streaming
/// its nodes; a damaged file is read as far as it is valid, with a warning.
pub fn read(reader: impl Read, path: &Path) -> Result<(EtRank, Vec<String>), Error> {
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
    if n.skipped > 0 {
        let first = n.first_skip.as_ref().map_or(String::new(), |(at, msg)| {
            format!("; the first at {at}: {msg}")
        });
        warnings.push(format!(
            "{}: skipped {} node(s) that are not execution trace nodes{first}",
            path.display(),
            n.skipped
        ));
    }
    if n.implausible > 0 {
        warnings.push(format!(
            "{}: {} communication node(s) with a tensor size that is no real size (over 1 TiB); their bytes are left out",
            path.display(),
            n.implausible
        ));
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
                    bytes: 400
                },
                EtColl {
                    kind: CollKind::AllToAll,
                    bytes: 60
                },
            ]
        );
        let bad = read(&b"{\"nodes\": ["[..], Path::new("et.json")).unwrap_err();
        assert!(bad.to_string().contains("et.json"), "{bad}");
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
            warnings[0].contains(
                "skipped 1 node(s) that are not execution trace nodes; the first at line 4"
            ),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("2 communication node(s) with a tensor size that is no real size"),
            "{warnings:?}"
        );
        // Cut inside the last node: the nodes before it are read.
        let cut = &doc[..doc.len() - 60];
        let (et, warnings) = read(cut, Path::new("et.json")).unwrap();
        assert_eq!(et.colls.len(), 2);
        assert!(warnings[0].contains("cut off or damaged"), "{warnings:?}");
    }
}
