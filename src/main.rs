use std::process::ExitCode;

// Readers allocate many small values per event; glibc's malloc spent most
// of a Flight Recorder folder's decoding in malloc and free, mimalloc a
// third of that (docs/internals.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ExitCode::from(ccl_bench::entry::main(std::env::args_os()))
}
