//! A tab's name: what actions, key scopes and `--tab` refer to a tab by. The
//! registry (`super::registry`) gives it its place, number and state.

/// A tab, named by its title in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tab(pub &'static str);

impl Tab {
    pub fn title(self) -> &'static str {
        self.0
    }
}
