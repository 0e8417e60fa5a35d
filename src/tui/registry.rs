//! The tab registry: every tab in tab-bar order. The tab bar, number keys,
//! `--tab`, the help screen and the status line come from here and from the
//! key table.

use super::tab::Tab;
use super::tabs::{
    collectives, compare, hang, kernels, memory, stragglers, summary, timeline, Needs, TabSpec,
};

/// Every tab, in tab-bar order (number keys follow it).
pub(crate) static TABS: &[TabSpec] = &[
    summary::TAB,
    kernels::TAB,
    timeline::TAB,
    stragglers::TAB,
    memory::TAB,
    compare::TAB,
    collectives::TAB,
    // Last: the number keys of the tabs before it stay as they were.
    hang::TAB,
];

/// What the open run(s) hold, for [`Tab::available`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Has {
    pub memory: bool,
    pub flight: bool,
    pub two_runs: bool,
}

impl Default for Tab {
    fn default() -> Self {
        TABS[0].tab
    }
}

impl Tab {
    pub fn all() -> impl Iterator<Item = Tab> {
        TABS.iter().map(|s| s.tab)
    }

    /// The tabs shown: some need a memory snapshot, Flight Recorder dumps
    /// or two runs.
    pub fn available(has: Has) -> Vec<Tab> {
        TABS.iter()
            .filter(|s| match s.needs {
                Needs::Nothing => true,
                Needs::MemorySnapshot => has.memory,
                Needs::FlightDumps => has.flight,
                Needs::TwoRuns => has.two_runs,
            })
            .map(|s| s.tab)
            .collect()
    }

    /// The tab a session with two runs opens on.
    pub(crate) fn for_two_runs() -> Tab {
        TABS.iter()
            .find(|s| s.needs == Needs::TwoRuns)
            .map_or_else(Tab::default, |s| s.tab)
    }

    /// The `n`th tab of the registry (0-based), as number keys select them.
    pub(crate) fn nth(n: usize) -> Option<Tab> {
        TABS.get(n).map(|s| s.tab)
    }

    pub(crate) fn index(self) -> usize {
        TABS.iter().position(|s| s.tab == self).unwrap_or(0)
    }

    pub(crate) fn spec(self) -> &'static TabSpec {
        &TABS[self.index()]
    }

    /// The tab after this one among `tabs`, wrapping around.
    pub(crate) fn next(self, tabs: &[Tab]) -> Self {
        let i = tabs.iter().position(|&t| t == self).unwrap_or(0);
        tabs[(i + 1) % tabs.len()]
    }

    pub(crate) fn prev(self, tabs: &[Tab]) -> Self {
        let i = tabs.iter().position(|&t| t == self).unwrap_or(0);
        tabs[(i + tabs.len() - 1) % tabs.len()]
    }

    /// Parses a tab name as given to `--tab` (case-insensitive, prefix allowed).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let s = s.to_ascii_lowercase();
        Self::all().find(|t| !s.is_empty() && t.title().to_ascii_lowercase().starts_with(&s))
    }

    /// Every tab's name in lower case, for messages and `--help`.
    pub(crate) fn names() -> String {
        Self::all()
            .map(|t| t.title().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The label in the tab bar, e.g. ` 1 Summary `.
    pub(crate) fn label(self) -> String {
        format!(" {} {} ", self.index() + 1, self.title())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tab_is_registered_once() {
        for t in Tab::ALL {
            assert_eq!(TABS.iter().filter(|s| s.tab == t).count(), 1, "{t:?}");
        }
        assert_eq!(TABS.len(), Tab::ALL.len());
    }

    #[test]
    fn cycle_and_parse() {
        let one = Tab::available(Has::default());
        assert_eq!(Tab::Stragglers.next(&one), Tab::Collectives);
        assert_eq!(Tab::Collectives.next(&one), Tab::Summary);
        assert_eq!(Tab::Summary.prev(&one), Tab::Collectives);
        let two = Tab::available(Has {
            two_runs: true,
            ..Has::default()
        });
        assert_eq!(Tab::Stragglers.next(&two), Tab::Compare);
        assert_eq!(Tab::Compare.next(&two), Tab::Collectives);
        let mem = Tab::available(Has {
            memory: true,
            ..Has::default()
        });
        assert_eq!(Tab::Stragglers.next(&mem), Tab::Memory);
        let fr = Tab::available(Has {
            flight: true,
            ..Has::default()
        });
        assert_eq!(Tab::Collectives.next(&fr), Tab::Hang);
        assert_eq!(Tab::Hang.next(&fr), Tab::Summary);
        assert_eq!(Tab::parse("hang"), Some(Tab::Hang));
        assert_eq!(Tab::parse("mem"), Some(Tab::Memory));
        assert_eq!(Tab::parse("comp"), Some(Tab::Compare));
        assert_eq!(Tab::parse("coll"), Some(Tab::Collectives));
        assert_eq!(Tab::parse("time"), Some(Tab::Timeline));
        assert_eq!(Tab::parse("STRAG"), Some(Tab::Stragglers));
        assert_eq!(Tab::parse(""), None);
        assert_eq!(Tab::parse("x"), None);
        assert_eq!(Tab::for_two_runs(), Tab::Compare);
        assert_eq!((Tab::nth(2), Tab::nth(9)), (Some(Tab::Timeline), None));
        assert_eq!(
            Tab::names(),
            "summary, kernels, timeline, stragglers, memory, compare, collectives, hang"
        );
    }
}
