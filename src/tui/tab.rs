//! A tab: what actions, key scopes and `--tab` refer to a tab by. The
//! registry (`super::registry`) gives it its place, number and state.

/// Every tab there is; the registry orders them in the tab bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tab {
    Summary,
    Kernels,
    Timeline,
    Stragglers,
    Memory,
    Compare,
    Collectives,
    Hang,
}

impl Tab {
    /// Every variant (the registry gives them their order; its test checks
    /// it names each).
    #[cfg(test)]
    pub(crate) const ALL: [Tab; 8] = [
        Self::Summary,
        Self::Kernels,
        Self::Timeline,
        Self::Stragglers,
        Self::Memory,
        Self::Compare,
        Self::Collectives,
        Self::Hang,
    ];

    /// Its name in the tab bar, the help screen and `--tab`.
    pub fn title(self) -> &'static str {
        match self {
            Self::Summary => "Summary",
            Self::Kernels => "Kernels",
            Self::Timeline => "Timeline",
            Self::Stragglers => "Stragglers",
            Self::Memory => "Memory",
            Self::Compare => "Compare",
            Self::Collectives => "Collectives",
            Self::Hang => "Hang",
        }
    }
}
