//! The tabs (Compare only when two runs are open). Each has its state struct
//! and its rendering in `tabs/`.

pub mod compare;
pub mod kernels;
pub mod memory;
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
    Memory,
    Compare,
}

impl Tab {
    pub const ALL: [Tab; 6] = [
        Self::Summary,
        Self::Kernels,
        Self::Timeline,
        Self::Stragglers,
        Self::Memory,
        Self::Compare,
    ];

    /// The tabs shown: Memory needs a memory snapshot, Compare two runs.
    pub fn available(memory: bool, two_runs: bool) -> Vec<Tab> {
        Self::ALL
            .into_iter()
            .filter(|t| match t {
                Self::Memory => memory,
                Self::Compare => two_runs,
                _ => true,
            })
            .collect()
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Summary => "Summary",
            Self::Kernels => "Kernels",
            Self::Timeline => "Timeline",
            Self::Stragglers => "Stragglers",
            Self::Memory => "Memory",
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
        let one = Tab::available(false, false);
        assert_eq!(Tab::Stragglers.next(&one), Tab::Summary);
        assert_eq!(Tab::Summary.prev(&one), Tab::Stragglers);
        let two = Tab::available(false, true);
        assert_eq!(Tab::Stragglers.next(&two), Tab::Compare);
        assert_eq!(Tab::Summary.prev(&two), Tab::Compare);
        let mem = Tab::available(true, false);
        assert_eq!(Tab::Stragglers.next(&mem), Tab::Memory);
        assert_eq!(Tab::parse("mem"), Some(Tab::Memory));
        assert_eq!(Tab::parse("comp"), Some(Tab::Compare));
        assert_eq!(Tab::parse("time"), Some(Tab::Timeline));
        assert_eq!(Tab::parse("STRAG"), Some(Tab::Stragglers));
        assert_eq!(Tab::parse(""), None);
        assert_eq!(Tab::parse("x"), None);
    }
}
