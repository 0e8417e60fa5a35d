//! What a load says about what it read: the words for people, and a kind
//! for the views that act on it (say it under the figure it puts in doubt,
//! keep it with results or not), so none has to match the words.

use serde::{Deserialize, Serialize};

/// One warning: its kind and its words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub kind: Kind,
    pub text: String,
}

/// What a warning is about, and so what it puts in doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Part of a file could not be read (cut off, damaged, events invalid
    /// or out of range): every figure of its rank may be off.
    Damaged,
    /// Values a file states that were not taken (a size that is no real
    /// size, a field not understood, rows past what its pages hold, lanes
    /// past their cap): the figures that need them leave them out.
    Ignored,
    /// How something the format leaves open was read (threads read as
    /// devices, windows joined, which run of several): the figures stand,
    /// read that way.
    Reading,
    /// Ranks missing, guessed or beyond the world size: who waits for whom
    /// is in doubt.
    Ranks,
    /// An input found and not read (another format beside, a second card,
    /// a file without a rank, a window that failed).
    NotRead,
    /// How the ranks' clocks were put on one time line, or why they were not.
    Clock,
    /// Collectives that could not be matched across ranks (members listed
    /// differently, kinds that differ at one position, calls left over):
    /// they are left out of the figures across ranks.
    Matching,
    /// Kernel class rules applied.
    Rules,
    /// This process could not spill a lean rank's collectives to a
    /// temporary file (its memory, not the run's data).
    NotSpilled,
    /// Lanes a summary stored of other classes could not be binned afresh
    /// under the class rules: the screen cannot draw them in pages.
    NotRebinned,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Damaged,
        Kind::Ignored,
        Kind::Reading,
        Kind::Ranks,
        Kind::NotRead,
        Kind::Clock,
        Kind::Matching,
        Kind::Rules,
        Kind::NotSpilled,
        Kind::NotRebinned,
    ];

    /// Its name in JSON and Python (`not_read`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Damaged => "damaged",
            Kind::Ignored => "ignored",
            Kind::Reading => "reading",
            Kind::Ranks => "ranks",
            Kind::NotRead => "not_read",
            Kind::Clock => "clock",
            Kind::Matching => "matching",
            Kind::Rules => "rules",
            Kind::NotSpilled => "not_spilled",
            Kind::NotRebinned => "not_rebinned",
        }
    }
}

impl Warning {
    pub fn new(kind: Kind, text: impl Into<String>) -> Self {
        Self {
            kind,
            text: text.into(),
        }
    }

    pub fn damaged(text: impl Into<String>) -> Self {
        Self::new(Kind::Damaged, text)
    }

    pub fn ignored(text: impl Into<String>) -> Self {
        Self::new(Kind::Ignored, text)
    }

    pub fn reading(text: impl Into<String>) -> Self {
        Self::new(Kind::Reading, text)
    }

    pub fn not_read(text: impl Into<String>) -> Self {
        Self::new(Kind::NotRead, text)
    }
}

/// The words of `warnings`, `sep` between each.
pub fn joined(warnings: &[Warning], sep: &str) -> String {
    let texts: Vec<&str> = warnings.iter().map(|w| w.text.as_str()).collect();
    texts.join(sep)
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_its_words_and_its_kind_survives_a_round_trip() {
        let w = Warning::damaged("r.json: cut off at line 3");
        assert_eq!(w.to_string(), "r.json: cut off at line 3");
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"damaged","text":"r.json: cut off at line 3"}"#
        );
        assert_eq!(serde_json::from_str::<Warning>(&json).unwrap(), w);
    }

    #[test]
    fn a_kinds_name_is_its_json() {
        for k in Kind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
    }
}
