//! The command line's entry point, shared by the `ccl-bench` binary and the
//! `ccl-bench` script the Python package installs.

use std::ffi::OsString;
use std::io::IsTerminal;

use anyhow::Result;
use clap::Parser;

use crate::cli::{sample_path, Cli, Command, SAMPLE};
use crate::{headless, tui};

/// Parses `args` (the program name first) and runs the command; returns the
/// exit status. Help, version and usage errors are printed by clap here.
pub fn main(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> u8 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(headless::EXIT_USAGE);
        }
    };
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            // `ccl-bench ... | head` closing the pipe is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return 0;
            }
            crate::say!("ccl-bench: error: {}", crate::error::one_line(&e));
            1
        }
    }
}

fn run(cli: &Cli) -> Result<u8> {
    match &cli.command {
        Some(Command::Compare(args)) => return headless::compare(args),
        Some(Command::Export(args)) => return headless::export(args),
        Some(Command::Collectives(args)) => return headless::collectives(args),
        Some(Command::Summarize(args)) => return headless::summarize(args),
        Some(Command::Hang(args)) => return headless::hang(args),
        Some(Command::Gate(args)) => return headless::gate(args),
        Some(Command::Baseline(args)) => return headless::baseline(args),
        Some(Command::Overview(args)) => return headless::overview(args),
        Some(Command::Stragglers(args)) => return headless::stragglers(args),
        Some(Command::Ops(args)) => return headless::ops(args),
        Some(Command::Mcp) => return crate::mcp::serve(),
        None => {}
    }
    if let Some(out) = &cli.screenshot {
        return tui::screenshot::write(cli, out);
    }
    // Browsing needs a terminal on both ends that can draw a screen; piped,
    // or on a dumb terminal (Emacs shell, some CI logs), print the table.
    let tty = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let term = std::env::var_os("TERM");
    let interactive = can_draw(tty, term.as_deref());
    if tty && !interactive && cli.browse() {
        crate::say!(
            "ccl-bench: TERM=dumb cannot draw the interactive screen; printing the table \
             instead (set TERM, e.g. TERM=xterm-256color, to browse)"
        );
    }
    if let Some(args) = cli.as_compare() {
        if cli.browse() && interactive && cli.format == crate::cli::Format::Table {
            tui::run(cli.runs(), cli.load_options(), cli.options(), cli.threshold)?;
            return Ok(0);
        }
        return headless::compare(&args);
    }
    if cli.browse() && interactive {
        let path = match cli.trace_path() {
            Some(p) => p.clone(),
            None => match sample_path() {
                Some(p) => p,
                None => {
                    crate::say!(
                        "ccl-bench: no trace given and the sample ({SAMPLE}) is not here; \
                         use ccl-bench DIR (ccl-bench --help for more)"
                    );
                    return Ok(headless::EXIT_USAGE);
                }
            },
        };
        tui::run(vec![path], cli.load_options(), cli.options(), cli.threshold)?;
        return Ok(0);
    }
    headless::run(cli)
}

/// Whether the interactive screen can be drawn: a terminal on both ends
/// (`tty`) that is not `TERM=dumb` (Emacs shell, some CI logs), which
/// cannot place the cursor.
fn can_draw(tty: bool, term: Option<&std::ffi::OsStr>) -> bool {
    tty && term.is_none_or(|t| t != "dumb")
}

#[cfg(test)]
mod tests {
    use super::can_draw;
    use std::ffi::OsStr;

    #[test]
    fn a_dumb_terminal_gets_the_table() {
        assert!(can_draw(true, Some(OsStr::new("xterm-256color"))));
        assert!(can_draw(true, None));
        assert!(!can_draw(true, Some(OsStr::new("dumb"))));
        assert!(!can_draw(false, Some(OsStr::new("xterm"))));
    }
}
