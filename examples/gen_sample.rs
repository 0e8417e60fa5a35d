//! Writes the bundled sample trace directory (deterministic):
//!
//!     cargo run --release --example gen_sample -- trace_collection/llama_fsdp_8gpu
//!
//! Eight `rank{N}_trace.json` PyTorch profiler traces of three FSDP training steps
//! (rank 5 is a straggler) and a CCL-Bench workload card.

use std::path::PathBuf;

use ccl_bench::synth::{training_run, RunShape, SAMPLE_CARD};

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "trace_collection/llama_fsdp_8gpu".into()),
    );
    std::fs::create_dir_all(&out)?;
    for (rank, t) in training_run(&RunShape::default()).iter().enumerate() {
        std::fs::write(out.join(format!("rank{rank}_trace.json")), t.to_json())?;
    }
    std::fs::write(out.join("workload_card.yaml"), SAMPLE_CARD)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
