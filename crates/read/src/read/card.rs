//! Reads a CCL-Bench workload card (YAML).

use std::path::Path;

use crate::error::{Error, Result};
use crate::model::WorkloadCard;

/// Cards bigger than this are not hand-written cards.
const MAX_CARD: u64 = 1 << 20;

/// Parses the card at `path`. A YAML file without a `workload` or `Model-executor`
/// section is not a card (other tools leave YAML configs beside traces).
pub fn read(path: &Path) -> Result<WorkloadCard> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_CARD {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: format!("{len} bytes is too large for a workload card"),
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    parse(&text, path)
}

pub fn parse(text: &str, path: &Path) -> Result<WorkloadCard> {
    let not_card = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    let card: WorkloadCard = serde_saphyr::from_str(text)
        .map_err(|e| not_card(format!("not a valid workload card: {e}")))?;
    if card == WorkloadCard::default() {
        return Err(not_card(
            "no `workload` or `Model-executor` section: not a workload card".into(),
        ));
    }
    Ok(card)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::SAMPLE_CARD;

    #[test]
    fn sample_card() {
        let c = parse(SAMPLE_CARD, Path::new("card.yaml")).unwrap();
        assert_eq!(c.workload.model.model_arch.num_params, Some(1.3e9));
        assert_eq!(c.workload.data.batch_size, Some(8.0));
        assert_eq!(
            c.workload.hardware.xpu_spec.model.as_deref(),
            Some("H100-SXM")
        );
        assert_eq!(
            c.workload.hardware.network_topo.bandwidth_gbps,
            vec![400.0, 3600.0]
        );
        assert_eq!(c.executor.model_plan_parallelization.dp_shard, Some(8.0));
        assert_eq!(
            c.executor.communication_library.name.as_deref(),
            Some("NCCL")
        );
        let d = c.describe();
        assert_eq!(d[0], ("model", "llama 1.3B training bf16".to_owned()));
        assert!(d
            .iter()
            .any(|(k, v)| *k == "parallelism" && v.contains("dp_shard=8")));
    }

    #[test]
    fn lenient_fields_and_non_cards() {
        let c = parse(
            "workload:\n  model:\n    model_arch:\n      num_params: 7B\n    moe: yes\n  data:\n    batch_size: [1]\n",
            Path::new("c.yaml"),
        )
        .unwrap();
        assert_eq!(c.workload.model.model_arch.num_params, Some(7e9));
        assert_eq!(c.workload.model.moe, Some(true));
        assert_eq!(c.workload.data.batch_size, None);
        let e = parse("name: something else\n", Path::new("x.yaml")).unwrap_err();
        assert!(e.to_string().contains("x.yaml: no `workload`"), "{e}");
        let e = parse("workload: [\n", Path::new("x.yaml")).unwrap_err();
        assert!(e.to_string().contains("not a valid workload card"), "{e}");
    }
}
