//! Writes the bundled sample trace directories (deterministic):
//!
//!     cargo run --release --example gen_sample -- trace_collection
//!
//! `llama_fsdp_8gpu`: eight `rank{N}_trace.json` PyTorch profiler traces of three
//! FSDP training steps (rank 5 is a straggler) and a CCL-Bench workload card;
//! `llama_fsdp_8gpu_balanced`: the same run without the straggler;
//! `llama_fsdp_8gpu_hang`: the NCCL Flight Recorder dumps of a hung run of it
//! (rank 5 leaves the loop in step 4).

use std::path::PathBuf;

use ccl_bench::synth::flight::{hang_sample, HANG_SAMPLE};
use ccl_bench::synth::{samples, training_run, SAMPLE_CARD};

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "trace_collection".into()),
    );
    for (name, shape) in samples() {
        let out = root.join(name);
        std::fs::create_dir_all(&out)?;
        for (rank, t) in training_run(&shape).iter().enumerate() {
            std::fs::write(out.join(format!("rank{rank}_trace.json")), t.to_json())?;
        }
        std::fs::write(out.join("workload_card.yaml"), SAMPLE_CARD)?;
        eprintln!("wrote {}", out.display());
    }
    let out = root.join(HANG_SAMPLE);
    std::fs::create_dir_all(&out)?;
    hang_sample().write(&out, false)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
