//! Interned strings: each distinct kernel or op name is stored once per rank and
//! events refer to it by a `u32` id.

// foldhash: names are hashed once per event while loading; SipHash showed in profiles.
use foldhash::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub u32);

#[derive(Debug, Default, Clone)]
pub struct Interner {
    ids: HashMap<Box<str>, StrId>,
    strings: Vec<Box<str>>,
}

impl Interner {
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = StrId(u32::try_from(self.strings.len()).expect("fewer than 2^32 names"));
        self.strings.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    pub fn get(&self, id: StrId) -> &str {
        &self.strings[id.0 as usize]
    }

    /// The id of `s`, if interned.
    pub fn id(&self, s: &str) -> Option<StrId> {
        self.ids.get(s).copied()
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// Every name, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.strings.iter().map(|s| &**s)
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_string_same_id() {
        let mut i = Interner::default();
        let a = i.intern("ncclKernel_AllReduce");
        let b = i.intern("gemm");
        assert_eq!(i.intern("ncclKernel_AllReduce"), a);
        assert_ne!(a, b);
        assert_eq!(i.get(b), "gemm");
        assert_eq!(i.len(), 2);
    }
}
