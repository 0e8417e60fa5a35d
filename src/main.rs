use std::process::ExitCode;

// Readers allocate many small values per event; glibc's malloc spent most
// of a Flight Recorder folder's decoding in malloc and free, mimalloc a
// third of that (docs/internals.md). Built without transparent huge pages:
// with them, each page mimalloc gave back and reused was zeroed 2 MB at a
// time (40 % of reading 256 dumps).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ExitCode::from(ccl_bench::entry::main(std::env::args_os()))
}
