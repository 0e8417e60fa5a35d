//! Interned strings: each distinct kernel or op name is stored once per rank and
//! events refer to it by a `u32` id.

// foldhash: names are hashed once per event while loading; SipHash showed in profiles.
use foldhash::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub u32);

/// A rank's names. Names several ranks hold alike (the NVTX ranges of a
/// process that drove many GPUs) sit in a shared frozen part, held once:
/// their ids come first, then the rank's own.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    shared: Option<std::sync::Arc<Interner>>,
    ids: HashMap<Box<str>, StrId>,
    strings: Vec<Box<str>>,
}

impl Interner {
    /// These names frozen and shared: every clone of the result holds them
    /// once between them, and interns its own after them.
    pub(crate) fn into_shared(self) -> Self {
        Self {
            shared: Some(std::sync::Arc::new(self)),
            ..Self::default()
        }
    }

    fn shared_len(&self) -> usize {
        self.shared.as_ref().map_or(0, |b| b.len())
    }

    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(id) = self.id(s) {
            return id;
        }
        let id = StrId(
            u32::try_from(self.shared_len() + self.strings.len()).expect("fewer than 2^32 names"),
        );
        self.strings.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    pub fn get(&self, id: StrId) -> &str {
        let at = id.0 as usize;
        match &self.shared {
            Some(b) if at < b.len() => b.get(id),
            _ => &self.strings[at - self.shared_len()],
        }
    }

    /// The id of `s`, if interned.
    pub fn id(&self, s: &str) -> Option<StrId> {
        self.shared
            .as_ref()
            .and_then(|b| b.id(s))
            .or_else(|| self.ids.get(s).copied())
    }

    pub fn len(&self) -> usize {
        self.shared_len() + self.strings.len()
    }

    /// Every name, in id order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        let own = self.strings.iter().map(|s| &**s);
        match &self.shared {
            Some(b) => Box::new(b.iter().chain(own)),
            None => Box::new(own),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[test]
    fn shared_names_come_first_and_are_held_once() {
        let mut base = Interner::default();
        let nvtx = base.intern("forward");
        base.intern("backward");
        let shared = base.into_shared();
        let (mut a, mut b) = (shared.clone(), shared.clone());
        assert_eq!(a.intern("forward"), nvtx);
        let ga = a.intern("gemm_a");
        let gb = b.intern("gemm_b");
        assert_eq!((ga, gb), (StrId(2), StrId(2)));
        assert_eq!(
            (a.get(ga), b.get(gb), b.get(StrId(1))),
            ("gemm_a", "gemm_b", "backward")
        );
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            ["forward", "backward", "gemm_a"]
        );
        assert_eq!(a.id("backward"), Some(StrId(1)));
        assert_eq!(b.len(), 3);
        // One copy of the shared part, however many ranks hold it.
        let base_of = |i: &Interner| std::sync::Arc::as_ptr(i.shared.as_ref().unwrap());
        assert_eq!(base_of(&a), base_of(&b));
    }
}
