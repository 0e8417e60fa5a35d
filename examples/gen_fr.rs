//! Writes NCCL Flight Recorder dumps of a hung run for benchmarks:
//!
//!     cargo run --release --example gen_fr -- OUT_DIR RANKS ENTRIES [--json]
//!
//! RANKS ranks in tensor-parallel groups of 8; each rank records ENTRIES
//! all-reduces of its group (the ring buffer's size), and rank RANKS*2/3
//! never enters the last one. Each call's Python stack passes through 8
//! nested modules (28 frames), as a real model's does; PyTorch's pickler
//! writes each distinct frame once.

use ccl_bench::model::flight::CallState;
use ccl_bench::synth::flight::{Call, FrRun};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: gen_fr OUT_DIR RANKS ENTRIES [--json]");
        std::process::exit(2);
    }
    let out = std::path::Path::new(&args[0]);
    let ranks: u32 = args[1].parse().expect("RANKS is a number");
    let entries: usize = args[2].parse().expect("ENTRIES is a number");
    let json = args.iter().any(|a| a == "--json");
    let late = ranks * 2 / 3;
    let groups = ranks.div_ceil(8);
    let members = |g: u32| (g * 8..(g * 8 + 8).min(ranks)).collect::<Vec<u32>>();
    let names: Vec<String> = (0..groups).map(|g| (g + 1).to_string()).collect();
    let mut run = FrRun::new(ranks);
    run.module_depth(8);
    for g in 0..groups {
        run.group(&names[g as usize], "tp", members(g));
    }
    for i in 0..entries {
        let last = i + 1 == entries;
        for g in 0..groups {
            let mut m = members(g);
            let mut call = Call::all_reduce(&names[g as usize], 4096);
            if last {
                m.retain(|&r| r != late);
                call = call.state(CallState::Started);
            }
            run.call(&m, &call);
        }
    }
    std::fs::create_dir_all(out)?;
    run.write(out, json)
}
