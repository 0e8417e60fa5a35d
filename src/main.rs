use std::process::ExitCode;

use clap::Parser;

use ccl_bench::cli::Cli;
use ccl_bench::headless;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match headless::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            // `ccl-bench ... | head` closing the pipe is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("ccl-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
