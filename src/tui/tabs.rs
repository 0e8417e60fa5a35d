//! What a tab is: its state behind [`TabView`], described by a [`TabSpec`].
//! A tab is one file in `tabs/` plus one line in the registry
//! (`super::registry::TABS`).

pub mod collectives;
pub mod compare;
pub mod hang;
pub mod kernels;
pub mod memory;
pub mod stragglers;
pub mod summary;
pub mod timeline;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

pub use super::tab::Tab;

use super::action::Action;
use super::data::Data;
use super::pair::Pair;
use super::theme::Theme;

/// What a tab sees: the run it shows, both runs when two are open, and the
/// area it draws in.
pub struct TabCtx<'a> {
    pub data: &'a Data,
    pub pair: Option<&'a Pair>,
    pub area: Rect,
}

/// A tab's state, changed only by actions and drawn from it.
pub trait TabView: Send + std::any::Any {
    fn update(&mut self, action: Action, view: &TabCtx);
    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer);
    /// The tab's state in words, shown before its keys in the status line.
    fn status(&self) -> String {
        String::new()
    }
    /// Whether a prompt in the tab takes the keys.
    fn typing(&self) -> bool {
        false
    }
    /// A place on the Timeline the last action asked to show (Enter on a row).
    fn take_jump(&mut self) -> Option<Jump> {
        None
    }
    /// The time range and cursor shown, when on the Timeline's clock: the
    /// next tab opened that shares the clock shows them too.
    fn clock(&self, _data: &Data) -> Option<(crate::model::Interval, crate::model::Ns)> {
        None
    }
    /// Shows another tab's range and cursor (see [`TabView::clock`]) where
    /// this tab is on the same clock; `area` is the tab's.
    fn follow(
        &mut self,
        _view: crate::model::Interval,
        _cursor: crate::model::Ns,
        _data: &Data,
        _area: Rect,
    ) {
    }
}

/// A place to show on the Timeline: a rank's lane (its stream's when given),
/// a time range and the cursor in it, and why, for the status line.
#[derive(Debug, Clone, PartialEq)]
pub struct Jump {
    pub rank_index: usize,
    pub stream: Option<u32>,
    pub span: crate::model::Interval,
    pub cursor: crate::model::Ns,
    pub why: String,
}

/// When a tab is in the tab bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    Nothing,
    /// A CUDA memory snapshot in the run.
    MemorySnapshot,
    /// NCCL Flight Recorder dumps in the run.
    FlightDumps,
    /// Two runs open (the tab opened first then).
    TwoRuns,
}

impl Needs {
    /// What a run must have for the tab to open, in words.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Needs::TwoRuns => "two runs (--trace A B)",
            Needs::MemorySnapshot => "a CUDA memory snapshot beside the traces",
            Needs::FlightDumps => "NCCL Flight Recorder dumps beside the traces",
            Needs::Nothing => "nothing more",
        }
    }
}

/// One registered tab.
pub(crate) struct TabSpec {
    pub tab: Tab,
    pub needs: Needs,
    /// Its state for a run, fresh.
    pub make: fn(&Data) -> Box<dyn TabView>,
    /// Its state reads one run's data, so it starts afresh when the other
    /// run is shown (`b`).
    pub per_run: bool,
}
