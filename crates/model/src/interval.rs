//! One span of time, `[start, end)`: a plain value the spill interface
//! (`slab`) can name without the sets made of it.

use super::time::Ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval {
    pub start: Ns,
    pub end: Ns,
}

impl Interval {
    pub fn new(start: Ns, end: Ns) -> Self {
        Self { start, end }
    }

    pub fn len(&self) -> Ns {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}
