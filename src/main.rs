use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use ccl_bench::cli::{sample_path, Cli, Command, SAMPLE};
use ccl_bench::{headless, tui};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            // `ccl-bench ... | head` closing the pipe is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            ccl_bench::say!("ccl-bench: error: {}", ccl_bench::error::one_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode> {
    if let Some(Command::Compare(args)) = &cli.command {
        return headless::compare(args);
    }
    if let Some(Command::Export(args)) = &cli.command {
        return headless::export(args);
    }
    if let Some(out) = &cli.screenshot {
        return ccl_bench::tui::screenshot::write(cli, out);
    }
    // Browsing needs a terminal on both ends; piped, print the metric table.
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if let Some(args) = cli.as_compare() {
        if cli.browse() && interactive && cli.format == ccl_bench::cli::Format::Table {
            tui::run(cli.runs(), cli.load_options(), cli.options(), cli.threshold)?;
            return Ok(ExitCode::SUCCESS);
        }
        return headless::compare(&args);
    }
    if cli.browse() && interactive {
        let path = match cli.trace_path() {
            Some(p) => p.clone(),
            None => match sample_path() {
                Some(p) => p,
                None => {
                    ccl_bench::say!(
                        "ccl-bench: no trace given and the sample ({SAMPLE}) is not here; \
                         use ccl-bench DIR (ccl-bench --help for more)"
                    );
                    return Ok(ExitCode::from(headless::EXIT_USAGE));
                }
            },
        };
        tui::run(vec![path], cli.load_options(), cli.options(), cli.threshold)?;
        return Ok(ExitCode::SUCCESS);
    }
    headless::run(cli)
}
