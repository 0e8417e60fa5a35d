//! The tabs (Compare only when two runs are open). Each has its state struct
//! and its rendering in `tabs/`.

pub mod compare;
pub mod kernels;
pub mod stragglers;
pub mod summary;
pub mod timeline;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Summary,
    Kernels,
    Timeline,
    Stragglers,
    Compare,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Self::Summary,
        Self::Kernels,
        Self::Timeline,
        Self::Stragglers,
        Self::Compare,
    ];

    /// The tabs shown: Compare needs two runs.
    pub fn available(two_runs: bool) -> &'static [Tab] {
        if two_runs {
            &Self::ALL
        } else {
            &Self::ALL[..4]
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Summary => "Summary",
            Self::Kernels => "Kernels",
            Self::Timeline => "Timeline",
            Self::Stragglers => "Stragglers",
            Self::Compare => "Compare",
        }
    }

    pub fn index(self) -> usize {
        Self::ALL.iter().position(|&t| t == self).unwrap_or(0)
    }

    /// The tab after this one among `tabs`, wrapping around.
    pub fn next(self, tabs: &[Tab]) -> Self {
        let i = tabs.iter().position(|&t| t == self).unwrap_or(0);
        tabs[(i + 1) % tabs.len()]
    }

    pub fn prev(self, tabs: &[Tab]) -> Self {
        let i = tabs.iter().position(|&t| t == self).unwrap_or(0);
        tabs[(i + tabs.len() - 1) % tabs.len()]
    }

    /// Parses a tab name as given to `--tab` (case-insensitive, prefix allowed).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|t| !s.is_empty() && t.title().to_ascii_lowercase().starts_with(&s))
    }

    /// The label in the tab bar, e.g. ` 1 Summary `.
    pub fn label(self) -> String {
        format!(" {} {} ", self.index() + 1, self.title())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_and_parse() {
        let one = Tab::available(false);
        assert_eq!(Tab::Stragglers.next(one), Tab::Summary);
        assert_eq!(Tab::Summary.prev(one), Tab::Stragglers);
        let two = Tab::available(true);
        assert_eq!(Tab::Stragglers.next(two), Tab::Compare);
        assert_eq!(Tab::Summary.prev(two), Tab::Compare);
        assert_eq!(Tab::parse("comp"), Some(Tab::Compare));
        assert_eq!(Tab::parse("time"), Some(Tab::Timeline));
        assert_eq!(Tab::parse("STRAG"), Some(Tab::Stragglers));
        assert_eq!(Tab::parse(""), None);
        assert_eq!(Tab::parse("x"), None);
    }
}
