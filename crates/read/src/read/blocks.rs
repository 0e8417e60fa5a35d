//! A vector grown a block at a time and never moved, for the few that grow
//! to millions of items while a reader streams: one vector doubling holds
//! the old and the new copy at once, and the allocator keeps the old for a
//! while after (a 71 MB memory snapshot peaked at 71 MB growing three such
//! vectors by doubling, 41 MB in blocks).

const BLOCK: usize = 1 << 16;

#[derive(Debug)]
pub(crate) struct Blocks<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Self {
        Blocks {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Copy> Blocks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, v: T) {
        if self.len.is_multiple_of(BLOCK) {
            self.blocks.push(Vec::with_capacity(BLOCK));
        }
        if let Some(b) = self.blocks.last_mut() {
            b.push(v);
        }
        self.len += 1;
    }

    /// Grows to `n` items, the new ones `fill`.
    pub(crate) fn resize(&mut self, n: usize, fill: T) {
        while self.len < n {
            self.push(fill);
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<T> {
        self.blocks.get(i / BLOCK)?.get(i % BLOCK).copied()
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.blocks.get_mut(i / BLOCK)?.get_mut(i % BLOCK)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + Clone {
        self.blocks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_where_they_were_put_across_blocks() {
        let mut b = Blocks::default();
        b.resize(BLOCK + 3, 0u32);
        *b.get_mut(BLOCK + 1).unwrap() = 7;
        b.push(9);
        assert_eq!(b.len(), BLOCK + 4);
        assert_eq!(
            (b.get(BLOCK + 1), b.get(BLOCK + 3), b.get(BLOCK + 4)),
            (Some(7), Some(9), None)
        );
        assert_eq!(b.iter().filter(|&&x| x != 0).count(), 2);
        assert_eq!(b.blocks.len(), 2);
    }
}
