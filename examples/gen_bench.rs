//! Writes a large synthetic multi-rank Kineto trace set for benchmarks (see
//! `ccl_bench::synth::stream`).
//!
//!     cargo run --release --example gen_bench -- OUT_DIR RANKS TOTAL_MB [--gzip] [--one-line] [--collectives] [--groups-of N]
//!
//! Events are laid out as the PyTorch profiler writes them, or with
//! `--one-line` one per line; with `--collectives` only the collectives are
//! written (see `Mix`); with `--groups-of N` they are issued in process
//! groups of N consecutive ranks (one group of every rank by default).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ccl_bench::synth::stream::{write_rank_in_groups, Layout, Mix};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: gen_bench OUT_DIR RANKS TOTAL_MB [--gzip] [--one-line] [--collectives] [--groups-of N]");
        std::process::exit(2);
    }
    let out = Path::new(&args[0]);
    let ranks: u32 = args[1].parse().expect("RANKS is a number");
    let total_mb: f64 = args[2].parse().expect("TOTAL_MB is a number");
    let gzip = args.iter().any(|a| a == "--gzip");
    let layout = if args.iter().any(|a| a == "--one-line") {
        Layout::Lines
    } else {
        Layout::Kineto
    };
    let mix = if args.iter().any(|a| a == "--collectives") {
        Mix::Collectives
    } else {
        Mix::Training
    };
    let group: u32 = match args.iter().position(|a| a == "--groups-of") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .expect("--groups-of takes a number"),
        None => ranks,
    };
    std::fs::create_dir_all(out)?;
    let per_rank = (total_mb * 1e6 / f64::from(ranks)) as u64;
    for r in 0..ranks {
        let name = format!("rank{r}_trace.json{}", if gzip { ".gz" } else { "" });
        let file = BufWriter::with_capacity(1 << 20, File::create(out.join(name))?);
        if gzip {
            let mut w = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            write_rank_in_groups(&mut w, layout, r, ranks, per_rank, mix, group)?;
            w.finish()?.flush()?;
        } else {
            let mut w = file;
            write_rank_in_groups(&mut w, layout, r, ranks, per_rank, mix, group)?;
            w.flush()?;
        }
    }
    Ok(())
}
