//! What a reader says when it has let go of most of what it held before it
//! makes more: the program's allocator may then give that memory back to
//! the system at once, where it would keep it a while (the binary's mimalloc
//! keeps freed memory a second, as suits a server, and what it keeps is not
//! always what the next allocation can reuse).

use std::sync::OnceLock;

static GIVE_BACK: OnceLock<fn()> = OnceLock::new();

/// Sets what [`let_go`] runs; once, by the program (the binary: its
/// allocator's collection). Nothing is run without it.
pub fn on_let_go(give_back: fn()) {
    let _ = GIVE_BACK.set(give_back);
}

/// Says that a reader has let go of most of its memory before it makes
/// more.
pub(crate) fn let_go() {
    if let Some(give_back) = GIVE_BACK.get() {
        give_back();
    }
}

// Read by this thread since it last let go.
thread_local!(static READ: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });

/// Lets go once a thread has read `EVERY` bytes of many small files since
/// it last did, each file's transient values freed among the values kept.
pub(crate) fn let_go_after(bytes: usize) {
    const EVERY: usize = 8 << 20;
    let read = READ.with(|r| {
        let n = r.get().saturating_add(bytes);
        r.set(if n >= EVERY { 0 } else { n });
        n
    });
    if read >= EVERY {
        let_go();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local!(static GIVEN: Cell<usize> = const { Cell::new(0) });

    fn given() -> usize {
        GIVEN.with(Cell::get)
    }

    /// What the program set runs each time a reader lets go (counted per
    /// thread, as it runs on the thread that let go); set twice, the first
    /// stays. After many small files, once every 8 MiB read.
    #[test]
    fn letting_go_runs_what_the_program_set() {
        on_let_go(|| GIVEN.with(|g| g.set(g.get() + 1)));
        on_let_go(|| panic!("set once"));
        let_go();
        let_go();
        assert_eq!(given(), 2);
        let_go_after((8 << 20) - 1);
        assert_eq!(given(), 2);
        let_go_after(1);
        assert_eq!(given(), 3);
        let_go_after(4 << 20);
        let_go_after((4 << 20) - 1);
        assert_eq!(given(), 3);
        let_go_after(1 << 30);
        assert_eq!(given(), 4);
    }
}
