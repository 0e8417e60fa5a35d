//! Peak dense throughput of accelerators, for MFU. Vendor datasheet figures
//! without sparsity, per device.

/// Peak FLOP/s by precision family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    pub name: &'static str,
    /// BF16/FP16 tensor-core dense.
    pub bf16: f64,
    pub fp8: Option<f64>,
    /// TF32 (NVIDIA, AMD) or FP32 where there is no TF32 path.
    pub fp32: f64,
}

const fn peak(name: &'static str, bf16: f64, fp8: Option<f64>, fp32: f64) -> Peak {
    Peak {
        name,
        bf16,
        fp8,
        fp32,
    }
}

/// Matched in order against the lower-cased model name (workload card
/// `xpu_spec.model`, else the trace's device name); more specific names first.
const TABLE: &[(&[&str], Peak)] = &[
    (
        &["gb200", "b200"],
        peak("B200", 2.25e15, Some(4.5e15), 1.1e15),
    ),
    (&["h200"], peak("H200", 989e12, Some(1979e12), 494e12)),
    (
        &["h100 pcie", "h100-pcie", "h100_pcie"],
        peak("H100 PCIe", 756e12, Some(1513e12), 378e12),
    ),
    (
        &["h100 nvl", "h100-nvl"],
        peak("H100 NVL", 835e12, Some(1671e12), 418e12),
    ),
    (
        &["h100", "h800"],
        peak("H100 SXM", 989e12, Some(1979e12), 494e12),
    ),
    (&["a100", "a800"], peak("A100", 312e12, None, 156e12)),
    (&["l40s"], peak("L40S", 362e12, Some(733e12), 183e12)),
    (&["v100"], peak("V100", 125e12, None, 15.7e12)),
    (
        &["mi325", "mi300x"],
        peak("MI300X", 1307.4e12, Some(2614.9e12), 653.7e12),
    ),
    (&["mi250x"], peak("MI250X", 383e12, None, 95.7e12)),
    (&["mi250"], peak("MI250", 362.1e12, None, 90.5e12)),
    (&["mi210"], peak("MI210", 181e12, None, 45.3e12)),
    (&["v6e", "trillium"], peak("TPU v6e", 918e12, None, 918e12)),
    (&["v5p"], peak("TPU v5p", 459e12, None, 459e12)),
    (
        &["v5e", "v5 lite", "v5litepod"],
        peak("TPU v5e", 197e12, None, 197e12),
    ),
    (
        &["tpu v4", "tpuv4", "v4"],
        peak("TPU v4", 275e12, None, 275e12),
    ),
];

pub fn lookup(model: &str) -> Option<Peak> {
    let m = model.to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(keys, _)| keys.iter().any(|k| m.contains(k)))
        .map(|(_, p)| *p)
}

impl Peak {
    /// Peak FLOP/s for a precision as written in a workload card (`bf16`,
    /// `fp16`, `fp8`, `fp32`, `tf32`); BF16 when unknown.
    pub fn for_precision(&self, precision: Option<&str>) -> Option<f64> {
        let p = precision.unwrap_or("bf16").to_ascii_lowercase();
        if p.contains("fp8") || p.contains("e4m3") || p.contains("e5m2") {
            self.fp8
        } else if p.contains("32") || p == "float" {
            Some(self.fp32)
        } else {
            Some(self.bf16)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_traces_and_cards_write_them() {
        assert_eq!(lookup("NVIDIA H100 80GB HBM3").unwrap().name, "H100 SXM");
        assert_eq!(lookup("H100-SXM").unwrap().bf16, 989e12);
        assert_eq!(lookup("NVIDIA H100 PCIe").unwrap().name, "H100 PCIe");
        assert_eq!(lookup("Tesla V100-SXM2-16GB").unwrap().name, "V100");
        assert_eq!(lookup("AMD Instinct MI300X").unwrap().name, "MI300X");
        assert_eq!(lookup("NVIDIA B200").unwrap().name, "B200");
        assert_eq!(lookup("Synthetic GPU"), None);
        let h = lookup("H100").unwrap();
        assert_eq!(h.for_precision(Some("fp8")), Some(1979e12));
        assert_eq!(h.for_precision(Some("FP32")), Some(494e12));
        assert_eq!(h.for_precision(None), Some(989e12));
        assert_eq!(lookup("A100").unwrap().for_precision(Some("fp8")), None);
    }
}
