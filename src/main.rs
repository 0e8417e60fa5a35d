use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(ccl_bench::entry::main(std::env::args_os()))
}
