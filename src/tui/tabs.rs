//! The four tabs. Each has its state struct and its rendering in `tabs/`.

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
}

impl Tab {
    pub const ALL: [Tab; 4] = [
        Self::Summary,
        Self::Kernels,
        Self::Timeline,
        Self::Stragglers,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Summary => "Summary",
            Self::Kernels => "Kernels",
            Self::Timeline => "Timeline",
            Self::Stragglers => "Stragglers",
        }
    }

    pub fn index(self) -> usize {
        Self::ALL.iter().position(|&t| t == self).unwrap_or(0)
    }

    pub fn next(self) -> Self {
        Self::ALL[(self.index() + 1) % Self::ALL.len()]
    }

    pub fn prev(self) -> Self {
        Self::ALL[(self.index() + Self::ALL.len() - 1) % Self::ALL.len()]
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
        assert_eq!(Tab::Stragglers.next(), Tab::Summary);
        assert_eq!(Tab::Summary.prev(), Tab::Stragglers);
        assert_eq!(Tab::parse("time"), Some(Tab::Timeline));
        assert_eq!(Tab::parse("STRAG"), Some(Tab::Stragglers));
        assert_eq!(Tab::parse(""), None);
        assert_eq!(Tab::parse("x"), None);
    }
}
