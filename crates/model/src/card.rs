//! The CCL-Bench workload card: what ran (model, data shape), on what hardware,
//! with which parallelism and communication library. Every field is optional:
//! cards are hand-written and often partial.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkloadCard {
    pub workload: Workload,
    #[serde(rename = "Model-executor")]
    pub executor: Executor,
    pub metric_source: MetricSource,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Workload {
    pub model: Model,
    pub data: Data,
    pub hardware: Hardware,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Model {
    /// `training` or `inference`.
    pub phase: Option<String>,
    #[serde(deserialize_with = "lenient_bool")]
    pub moe: Option<bool>,
    pub model_family: Option<String>,
    pub precision: Option<String>,
    pub model_arch: ModelArch,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ModelArch {
    #[serde(deserialize_with = "count")]
    pub num_params: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub num_layers: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub num_heads: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub head_dim: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Data {
    #[serde(deserialize_with = "count")]
    pub batch_size: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub seq_len: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub input_len: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub output_len: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Hardware {
    pub network_topo: NetworkTopo,
    pub xpu_spec: XpuSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NetworkTopo {
    /// Link bandwidth in Gbit/s: `[scale-out, scale-up]`.
    pub bandwidth_gbps: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct XpuSpec {
    /// `GPU` or `TPU`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub model: Option<String>,
    #[serde(deserialize_with = "count")]
    pub total_count: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub count_per_node: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Executor {
    pub framework: Named,
    pub model_plan_parallelization: Parallelism,
    pub communication_library: Named,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Named {
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Parallelism {
    #[serde(deserialize_with = "count")]
    pub dp_replicate: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub dp_shard: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub tp: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub pp: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub cp: Option<f64>,
    #[serde(deserialize_with = "count")]
    pub ep: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MetricSource {
    pub traces: Vec<String>,
}

impl WorkloadCard {
    /// One line per section, for the Summary tab and `--inputs`.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let m = &self.workload.model;
        let d = &self.workload.data;
        let x = &self.workload.hardware.xpu_spec;
        let p = &self.executor.model_plan_parallelization;
        let mut out = Vec::new();
        let model = join([
            m.model_family.clone(),
            m.model_arch.num_params.map(human_count),
            m.phase.clone(),
            m.precision.clone(),
            m.moe.filter(|&b| b).map(|_| "MoE".to_owned()),
        ]);
        if !model.is_empty() {
            out.push(("model", model));
        }
        let data = join([
            d.batch_size.map(|b| format!("batch {b}")),
            d.seq_len.map(|s| format!("seq {s}")),
            d.input_len.map(|s| format!("input {s}")),
            d.output_len.map(|s| format!("output {s}")),
        ]);
        if !data.is_empty() {
            out.push(("data", data));
        }
        let hw = join([
            x.total_count.map(|n| format!("{n} x")),
            x.model.clone().or_else(|| x.kind.clone()),
            x.count_per_node.map(|n| format!("({n} per node)")),
        ]);
        if !hw.is_empty() {
            out.push(("hardware", hw));
        }
        let bw = &self.workload.hardware.network_topo.bandwidth_gbps;
        if !bw.is_empty() {
            let names = ["scale-out", "scale-up"];
            let parts: Vec<String> = bw
                .iter()
                .enumerate()
                .map(|(i, v)| format!("{} {v} Gb/s", names.get(i).unwrap_or(&"link")))
                .collect();
            out.push(("network", parts.join(", ")));
        }
        let par: Vec<String> = [
            ("dp_replicate", p.dp_replicate),
            ("dp_shard", p.dp_shard),
            ("tp", p.tp),
            ("pp", p.pp),
            ("cp", p.cp),
            ("ep", p.ep),
        ]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
        .collect();
        if !par.is_empty() {
            out.push(("parallelism", par.join(" ")));
        }
        let stack = join([
            self.executor.framework.name.clone(),
            self.executor.communication_library.name.clone(),
        ]);
        if !stack.is_empty() {
            out.push(("software", stack));
        }
        out
    }
}

fn join<const N: usize>(parts: [Option<String>; N]) -> String {
    parts.into_iter().flatten().collect::<Vec<_>>().join(" ")
}

/// `1.3e9` → `1.3B`: parameter counts as people say them.
pub(crate) fn human_count(v: f64) -> String {
    let (div, suffix) = match v.abs() {
        a if a >= 1e12 => (1e12, "T"),
        a if a >= 1e9 => (1e9, "B"),
        a if a >= 1e6 => (1e6, "M"),
        a if a >= 1e3 => (1e3, "K"),
        _ => (1.0, ""),
    };
    let x = v / div;
    let s = format!("{x:.1}");
    format!("{}{suffix}", s.strip_suffix(".0").unwrap_or(&s))
}

/// A count written as a number or as text such as `"7B"`, `"1.3e9"` or `"70 M"`.
/// Anything else (null, a typo) becomes `None` rather than rejecting the card.
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Num(f64),
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Num(v) => Some(v),
        Raw::Text(s) => parse_count(&s),
        Raw::Other(_) => None,
    })
}

fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Bool(b) => Some(b),
        Raw::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        Raw::Other(_) => None,
    })
}

pub fn parse_count(s: &str) -> Option<f64> {
    let s = s.trim().replace(['_', ','], "");
    let (num, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'B' | 'G' => (&s[..s.len() - 1], 1e9),
        'T' => (&s[..s.len() - 1], 1e12),
        _ => (s.as_str(), 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    v.is_finite().then_some(v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_in_words() {
        assert_eq!(parse_count("7B"), Some(7e9));
        assert_eq!(parse_count("70 M"), Some(70e6));
        assert_eq!(parse_count("1.3e9"), Some(1.3e9));
        assert_eq!(parse_count("1_000"), Some(1000.0));
        assert_eq!(parse_count("lots"), None);
        assert_eq!(human_count(1.3e9), "1.3B");
        assert_eq!(human_count(7e9), "7B");
        assert_eq!(human_count(512.0), "512");
    }
}
