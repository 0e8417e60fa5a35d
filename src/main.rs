use std::process::ExitCode;

// Readers allocate many small values per event; glibc's malloc spent most
// of a Flight Recorder folder's decoding in malloc and free, mimalloc a
// third of that (docs/internals.md). Built without transparent huge pages:
// with them, each page mimalloc gave back and reused was zeroed 2 MB at a
// time (40 % of reading 256 dumps).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ccl_read::memory::on_let_go(give_back);
    ExitCode::from(ccl_bench::entry::main(std::env::args_os()))
}

/// mimalloc keeps freed memory a second before it gives it back, as suits
/// a server; a reader that let go of most of what it held asks for it to go
/// back now (an Nsight export's runtime calls, before its ops are placed:
/// 91 MB against 61 for a 210 MB export). Not for every reader, nor as a
/// shorter delay for all: memory given back is faulted in again when used
/// (an XSpace file's next device, 0.27 s of 1.3 with a 10 ms delay).
fn give_back() {
    // The calling thread's freed memory goes back to the system; nothing
    // live is touched.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}
