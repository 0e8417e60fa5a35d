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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static GIVEN: AtomicUsize = AtomicUsize::new(0);

    /// What the program set runs each time a reader lets go; set twice,
    /// the first stays.
    #[test]
    fn letting_go_runs_what_the_program_set() {
        on_let_go(|| {
            GIVEN.fetch_add(1, Ordering::Relaxed);
        });
        on_let_go(|| panic!("set once"));
        let_go();
        let_go();
        assert_eq!(GIVEN.load(Ordering::Relaxed), 2);
    }
}
