//! PyTorch execution traces (ET JSON, schemas 1.0.1 to 1.1.1-chakra): only
//! communication nodes are kept. A node's `inputs` are a list (1.0.x) or an
//! object with `values` (chakra); a tensor value is
//! `[tensor id, storage id, offset, numel, element bytes, device]`, possibly
//! nested in lists for tensor-list arguments.

use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::Error;
use crate::model::classify::coll_kind;
use crate::model::exec_trace::{EtColl, EtRank};

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(default)]
    schema: String,
    #[serde(borrow)]
    nodes: Vec<Node<'a>>,
}

#[derive(Deserialize)]
struct Node<'a> {
    name: String,
    #[serde(borrow, default)]
    inputs: Option<&'a RawValue>,
}

/// Sum of numel × element bytes over the tensor values in `v`.
fn tensor_bytes(v: &Value) -> u64 {
    match v {
        Value::Array(a) if a.len() == 6 && a[5].is_string() && a[3].is_u64() => {
            a[3].as_u64().unwrap_or(0) * a[4].as_u64().unwrap_or(0)
        }
        Value::Array(a) => a.iter().map(tensor_bytes).sum(),
        Value::Object(o) => o.get("values").map_or(0, tensor_bytes),
        _ => 0,
    }
}

/// A communication node: `nccl:*`, `gloo:*` or `mpi:*` (the backend's record,
/// one per collective, not the `c10d::` wrapper above it).
fn is_comm(name: &str) -> bool {
    ["nccl:", "gloo:", "mpi:", "xccl:"]
        .iter()
        .any(|p| name.starts_with(p))
}

pub fn read(bytes: &[u8], path: &Path) -> Result<EtRank, Error> {
    let doc: Doc = serde_json::from_slice(bytes).map_err(|e| Error::Parse {
        path: path.to_owned(),
        at: format!("line {} column {}", e.line(), e.column()),
        msg: format!("{e} (reading a PyTorch execution trace)"),
    })?;
    let colls = doc
        .nodes
        .iter()
        .filter(|n| is_comm(&n.name))
        .map(|n| {
            let bytes = n
                .inputs
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                .map_or(0, |v| tensor_bytes(&v));
            EtColl {
                kind: coll_kind(&n.name),
                bytes,
            }
        })
        .collect();
    Ok(EtRank {
        rank: 0,
        source: path.to_owned(),
        schema: doc.schema,
        colls,
    })
}

/// The rank in an execution trace's file name: `torch_et_3.json`,
/// `dlrm_eg_3.json`, `rank3_et.json`.
pub fn rank_of(path: &std::path::Path) -> Option<u32> {
    static TRAILING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[-_]([0-9]+)\.json(?:\.gz)?$").expect("valid regex")
    });
    crate::discover::rank_from_name(path).or_else(|| {
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
        let et = read(doc, Path::new("et.json")).unwrap();
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
        let bad = read(b"{\"nodes\": [", Path::new("et.json")).unwrap_err();
        assert!(bad.to_string().contains("et.json"), "{bad}");
    }
}
