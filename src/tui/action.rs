//! Everything the user can ask for. Keys and mouse events become actions
//! (`keymap`), and only `App::update` turns actions into state changes.

use super::tab::Tab;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Write what is on screen to files (SVG and plain text).
    SaveView,
    NextTab,
    PrevTab,
    SelectTab(Tab),
    /// A number key in the key table: the tab with that number.
    TabNumber,
    ToggleHelp,
    /// With two runs open: show the other one in the single-run tabs.
    SwitchRun,
    /// Cancel the innermost thing: help, a prompt, a filter, a zoom. Never quits.
    Back,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    // Timeline.
    ZoomIn,
    ZoomOut,
    ResetZoom,
    PanLeft,
    PanRight,
    CursorLeft,
    CursorRight,
    NextStep,
    PrevStep,
    /// Ask for a step number to jump to.
    GoToStep,
    /// Open the search prompt (find ops by name on every lane).
    Search,
    /// Show / hide the details of the op under the cursor.
    ToggleDetails,
    /// Mark one end of a time range at the cursor (the second mark closes it).
    Mark,
    /// Show the selected row on the Timeline.
    Open,
    /// Back to where the last `Open` came from.
    GoBack,
    NextHit,
    PrevHit,
    ToggleStreams,
    /// Timeline: CPU lanes (the threads that launched device work) on / off.
    ToggleCpu,
    /// Raw per-file clocks vs clocks aligned on shared collectives.
    ToggleAlign,
    /// Summary: show or fold the metrics that do not apply.
    ToggleNotApplicable,
    // Tables.
    NextSort,
    ReverseSort,
    NextRank,
    PrevRank,
    ToggleGrouping,
    /// What a heatmap's cells show: the next measure.
    NextMeasure,
    /// Collectives: transfer time against message size, or the table.
    TogglePlot,
    /// Start typing a filter.
    Filter,
    // Text entry (filter, step prompt).
    Input(char),
    Backspace,
    Submit,
    // Mouse, in terminal cells.
    Click {
        col: u16,
        row: u16,
    },
    Drag {
        col: u16,
        row: u16,
    },
    Release,
    ScrollUp {
        col: u16,
        row: u16,
    },
    ScrollDown {
        col: u16,
        row: u16,
    },
    Resize {
        width: u16,
        height: u16,
    },
}
