//! Keys to actions: one table, which is also what the help screen lists.

use ratatui::crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEventKind,
};

use super::action::Action;
use super::tabs::Tab;

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Global,
    Tab(Tab),
}

pub(crate) struct Binding {
    pub scope: Scope,
    pub keys: &'static [KeyCode],
    /// How the keys are written in the help screen.
    pub label: &'static str,
    pub action: Action,
    pub help: &'static str,
    /// The word the status line shows after the keys while the binding's
    /// tab is open ("" for none: the status line has room for a few).
    pub status: &'static str,
}

use KeyCode::{
    BackTab, Backspace, Char, Down, End, Enter, Esc, Home, Left, PageDown, PageUp, Right, Up,
};
use Scope::Global;

const SUMMARY: Scope = Scope::Tab(Tab::Summary);
const KERNELS: Scope = Scope::Tab(Tab::Kernels);
const TIMELINE: Scope = Scope::Tab(Tab::Timeline);
const STRAGGLERS: Scope = Scope::Tab(Tab::Stragglers);
const COMPARE: Scope = Scope::Tab(Tab::Compare);
const MEMORY: Scope = Scope::Tab(Tab::Memory);
const COLLECTIVES: Scope = Scope::Tab(Tab::Collectives);

macro_rules! bind {
    ($scope:expr, [$($k:expr),+], $label:literal, $action:expr, $help:literal) => {
        bind!($scope, [$($k),+], $label, $action, $help, "")
    };
    ($scope:expr, [$($k:expr),+], $label:literal, $action:expr, $help:literal, $status:literal) => {
        Binding {
            scope: $scope,
            keys: &[$($k),+],
            label: $label,
            action: $action,
            help: $help,
            status: $status,
        }
    };
}

pub(crate) static BINDINGS: &[Binding] = &[
    bind!(
        Global,
        [
            Char('1'),
            Char('2'),
            Char('3'),
            Char('4'),
            Char('5'),
            Char('6'),
            Char('7'),
            Char('8'),
            Char('9')
        ],
        "1 … 9",
        Action::TabNumber,
        "the tab with that number in the tab bar"
    ),
    bind!(
        Global,
        [Char('b')],
        "b",
        Action::SwitchRun,
        "other tabs show run A / run B (two runs open)"
    ),
    bind!(Global, [KeyCode::Tab], "Tab", Action::NextTab, "next tab"),
    bind!(
        Global,
        [BackTab],
        "Shift-Tab",
        Action::PrevTab,
        "previous tab"
    ),
    bind!(Global, [Char('?')], "?", Action::ToggleHelp, "this help"),
    bind!(Global, [Char('q')], "q", Action::Quit, "quit"),
    bind!(
        Global,
        [Backspace],
        "Backspace",
        Action::GoBack,
        "back to where Enter came from"
    ),
    bind!(
        KERNELS,
        [Enter],
        "Enter",
        Action::Open,
        "the kernel's (or class's) longest op on the Timeline",
        "timeline"
    ),
    bind!(
        STRAGGLERS,
        [Enter],
        "Enter",
        Action::Open,
        "the rank's step under the heatmap's cursor (n/p), else its step where the others waited longest for it, on the Timeline",
        "timeline"
    ),
    bind!(
        STRAGGLERS,
        [Char('n'), Char(']')],
        "n ]",
        Action::NextStep,
        "heatmap: the next step",
        "step"
    ),
    bind!(
        STRAGGLERS,
        [Char('p'), Char('[')],
        "p [",
        Action::PrevStep,
        "heatmap: the previous step"
    ),
    bind!(
        STRAGGLERS,
        [Char('m')],
        "m",
        Action::NextMeasure,
        "heatmap: step time / exposed comm / wait caused",
        "measure"
    ),
    bind!(
        COLLECTIVES,
        [Enter],
        "Enter",
        Action::Open,
        "the collective on the Timeline: its members' ops, the cursor where the last started",
        "timeline"
    ),
    bind!(
        COLLECTIVES,
        [Char('v')],
        "v",
        Action::TogglePlot,
        "transfer time against message size per kind and group role, with the Hockney fit (↑↓ series, Enter the worst fit)",
        "size plot"
    ),
    bind!(
        COLLECTIVES,
        [Char('c')],
        "c",
        Action::ToggleGrouping,
        "instances / grouped by kind, size and group",
        "grouped"
    ),
    bind!(
        COLLECTIVES,
        [Char('s'), Right],
        "s →",
        Action::NextSort,
        "sort by next column (or click a header)",
        "sort"
    ),
    bind!(
        COLLECTIVES,
        [Char('S'), Left],
        "S ←",
        Action::ReverseSort,
        "reverse the sort"
    ),
    bind!(
        Global,
        [Char('w')],
        "w",
        Action::SaveView,
        "write the screen to ccl-bench-<tab>-N.svg and .txt in the current folder"
    ),
    bind!(
        Global,
        [Esc],
        "Esc",
        Action::Back,
        "cancel: help, prompt, filter, the last zoom (never quits)"
    ),
    bind!(
        Global,
        [Up, Char('k')],
        "↑ k",
        Action::Up,
        "up (row, rank lane)"
    ),
    bind!(Global, [Down, Char('j')], "↓ j", Action::Down, "down"),
    bind!(Global, [PageUp], "PgUp", Action::PageUp, "page up"),
    bind!(Global, [PageDown], "PgDn", Action::PageDown, "page down"),
    bind!(
        Global,
        [Home, Char('g')],
        "Home g",
        Action::Home,
        "first row"
    ),
    bind!(Global, [End, Char('G')], "End G", Action::End, "last row"),
    bind!(
        KERNELS,
        [Char('/')],
        "/",
        Action::Filter,
        "filter by name (Enter keeps, Esc clears)",
        "filter"
    ),
    bind!(
        KERNELS,
        [Char('c')],
        "c",
        Action::ToggleGrouping,
        "kernels / kernel classes",
        "classes"
    ),
    bind!(
        KERNELS,
        [Char('r')],
        "r",
        Action::NextRank,
        "next rank (all ranks first)",
        "rank"
    ),
    bind!(KERNELS, [Char('R')], "R", Action::PrevRank, "previous rank"),
    bind!(
        KERNELS,
        [Char('s'), Right],
        "s →",
        Action::NextSort,
        "sort by next column (or click a header)",
        "sort"
    ),
    bind!(
        KERNELS,
        [Char('S'), Left],
        "S ←",
        Action::ReverseSort,
        "reverse the sort"
    ),
    bind!(
        STRAGGLERS,
        [Char('s'), Right],
        "s →",
        Action::NextSort,
        "sort by next column (or click a header)",
        "sort"
    ),
    bind!(
        STRAGGLERS,
        [Char('S'), Left],
        "S ←",
        Action::ReverseSort,
        "reverse the sort",
        "reverse"
    ),
    bind!(
        TIMELINE,
        [Char('+'), Char('=')],
        "+",
        Action::ZoomIn,
        "zoom in at the cursor (or wheel)",
        "zoom"
    ),
    bind!(
        TIMELINE,
        [Char('-')],
        "-",
        Action::ZoomOut,
        "zoom out",
        "out"
    ),
    bind!(
        TIMELINE,
        [Char('0')],
        "0",
        Action::ResetZoom,
        "whole trace",
        "all"
    ),
    bind!(
        TIMELINE,
        [Left, Char('h')],
        "← h",
        Action::PanLeft,
        "pan left (or drag)",
        "pan"
    ),
    bind!(
        TIMELINE,
        [Right, Char('l')],
        "→ l",
        Action::PanRight,
        "pan right"
    ),
    bind!(
        TIMELINE,
        [Char(','), Char('<')],
        ", <",
        Action::CursorLeft,
        "cursor left (or click)",
        "cursor"
    ),
    bind!(
        TIMELINE,
        [Char('.'), Char('>')],
        ". >",
        Action::CursorRight,
        "cursor right"
    ),
    bind!(
        TIMELINE,
        [Char('n'), Char(']')],
        "n ]",
        Action::NextStep,
        "next step",
        "step"
    ),
    bind!(
        TIMELINE,
        [Char('p'), Char('[')],
        "p [",
        Action::PrevStep,
        "previous step"
    ),
    bind!(
        TIMELINE,
        [Char(':')],
        ":",
        Action::GoToStep,
        "go to step N",
        "go to step"
    ),
    bind!(
        TIMELINE,
        [Char('/')],
        "/",
        Action::Search,
        "find ops by name on every lane (substring or regex)",
        "find"
    ),
    bind!(
        TIMELINE,
        [Char('}')],
        "}",
        Action::NextHit,
        "next search hit"
    ),
    bind!(
        TIMELINE,
        [Char('m')],
        "m",
        Action::Mark,
        "mark a range at the cursor, then its other end: totals per rank and top kernels (Esc clears)",
        "range"
    ),
    bind!(
        TIMELINE,
        [Char('d')],
        "d",
        Action::ToggleDetails,
        "details of the op under the cursor: launch, collective, wait",
        "details"
    ),
    bind!(
        TIMELINE,
        [Char('{')],
        "{",
        Action::PrevHit,
        "previous search hit"
    ),
    bind!(
        TIMELINE,
        [Char('t')],
        "t",
        Action::ToggleStreams,
        "one lane per rank / per stream",
        "streams"
    ),
    bind!(
        TIMELINE,
        [Char('c')],
        "c",
        Action::ToggleCpu,
        "CPU lanes on / off: per rank, the threads that launched device work (operators, runtime calls, ranges by nesting)",
        "cpu"
    ),
    bind!(
        SUMMARY,
        [Char('a')],
        "a",
        Action::ToggleNotApplicable,
        "show / fold the metrics that do not apply to this trace",
        "show/fold n/a"
    ),
    bind!(
        TIMELINE,
        [Char('a')],
        "a",
        Action::ToggleAlign,
        "aligned / raw clocks (when ranks were aligned)"
    ),
    bind!(
        MEMORY,
        [Char('r')],
        "r",
        Action::NextRank,
        "next rank",
        "rank"
    ),
    bind!(MEMORY, [Char('R')], "R", Action::PrevRank, "previous rank"),
    bind!(
        MEMORY,
        [Char('+'), Char('=')],
        "+",
        Action::ZoomIn,
        "zoom in at the cursor (or wheel)",
        "zoom"
    ),
    bind!(MEMORY, [Char('-')], "-", Action::ZoomOut, "zoom out"),
    bind!(
        MEMORY,
        [Char('0')],
        "0",
        Action::ResetZoom,
        "the whole history"
    ),
    bind!(MEMORY, [Left, Char('h')], "← h", Action::PanLeft, "pan left"),
    bind!(MEMORY, [Right, Char('l')], "→ l", Action::PanRight, "pan right"),
    bind!(
        MEMORY,
        [Char(','), Char('<')],
        ", <",
        Action::CursorLeft,
        "cursor left (or click)",
        "cursor"
    ),
    bind!(MEMORY, [Char('.'), Char('>')], ". >", Action::CursorRight, "cursor right"),
    bind!(MEMORY, [Char('n'), Char(']')], "n ]", Action::NextStep, "next step"),
    bind!(MEMORY, [Char('p'), Char('[')], "p [", Action::PrevStep, "previous step"),
    bind!(
        MEMORY,
        [Enter],
        "Enter",
        Action::Open,
        "this view and cursor on the Timeline (it shares them both ways)",
        "timeline"
    ),
    bind!(
        COMPARE,
        [Char('c')],
        "c",
        Action::ToggleGrouping,
        "metrics / kernels / classes / collectives",
        "next view"
    ),
    bind!(
        COMPARE,
        [Char('f')],
        "f",
        Action::Filter,
        "changed beyond the threshold only / all",
        "changed/all"
    ),
    bind!(
        COMPARE,
        [Char('n'), Char(']')],
        "n ]",
        Action::NextStep,
        "next step",
        "step"
    ),
    bind!(
        COMPARE,
        [Char('r')],
        "r",
        Action::NextRank,
        "timeline from the next rank",
        "rank"
    ),
    bind!(
        COMPARE,
        [Char('R')],
        "R",
        Action::PrevRank,
        "timeline from the previous rank"
    ),
    bind!(
        COMPARE,
        [Char('p'), Char('[')],
        "p [",
        Action::PrevStep,
        "previous step"
    ),
];

/// What the keyboard is doing: commands, or typing into a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Normal,
    Typing,
}

/// The action for a terminal event, if any.
pub(crate) fn action_for(event: &Event, tab: Tab, mode: Mode) -> Option<Action> {
    match event {
        Event::Key(key) => key_action(key, tab, mode),
        Event::Mouse(m) => {
            let (col, row) = (m.column, m.row);
            match m.kind {
                MouseEventKind::Down(MouseButton::Left) => Some(Action::Click { col, row }),
                MouseEventKind::Drag(MouseButton::Left) => Some(Action::Drag { col, row }),
                MouseEventKind::Up(MouseButton::Left) => Some(Action::Release),
                MouseEventKind::ScrollUp => Some(Action::ScrollUp { col, row }),
                MouseEventKind::ScrollDown => Some(Action::ScrollDown { col, row }),
                _ => None,
            }
        }
        Event::Resize(width, height) => Some(Action::Resize {
            width: *width,
            height: *height,
        }),
        _ => None,
    }
}

pub fn key_action(key: &KeyEvent, tab: Tab, mode: Mode) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    // Ctrl-C quits from anywhere: raw mode turns it into a key, not a signal.
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == Char('c') {
        return Some(Action::Quit);
    }
    if mode == Mode::Typing {
        return match key.code {
            Enter => Some(Action::Submit),
            Esc => Some(Action::Back),
            Backspace => Some(Action::Backspace),
            Char(c) => Some(Action::Input(c)),
            _ => None,
        };
    }
    BINDINGS
        .iter()
        .filter(|b| b.scope == Scope::Global || b.scope == Scope::Tab(tab))
        // Tab-specific bindings win over global ones for the same key.
        .max_by_key(|b| (b.keys.contains(&key.code), matches!(b.scope, Scope::Tab(_))))
        .filter(|b| b.keys.contains(&key.code))
        .and_then(|b| match (b.action, key.code) {
            (Action::TabNumber, Char(c)) => {
                let n = c.to_digit(10)?.checked_sub(1)?;
                Tab::nth(n as usize).map(Action::SelectTab)
            }
            (action, _) => Some(action),
        })
}

/// The status line's key hints for `tab`: its bindings that have a status word.
pub(crate) fn status_hints(tab: Tab) -> String {
    BINDINGS
        .iter()
        .filter(|b| b.scope == Scope::Tab(tab) && !b.status.is_empty())
        .map(|b| format!("{} {}", b.label, b.status))
        .collect::<Vec<_>>()
        .join("  ")
}

/// Every binding as a Markdown table (docs/guide.md): the keys everywhere,
/// then each tab's in the tab bar's order, as the help screen lists them.
pub fn markdown_table() -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("| where | keys | does |\n|---|---|---|\n");
    let scopes = std::iter::once(Scope::Global).chain(Tab::all().map(Scope::Tab));
    for scope in scopes {
        let mut first = true;
        for b in BINDINGS.iter().filter(|b| b.scope == scope) {
            let place = match (first, scope) {
                (false, _) => "",
                (true, Scope::Global) => "everywhere",
                (true, Scope::Tab(t)) => t.title(),
            };
            first = false;
            // "1 … 9" is one range, not three keys.
            let keys = if b.label.contains('…') {
                format!("`{}`", cell(b.label))
            } else {
                b.label
                    .split(' ')
                    .map(|k| format!("`{}`", cell(k)))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push_str(&format!("| {place} | {keys} | {} |\n", cell(b.help)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn every_scope_is_a_registered_tab_and_hints_come_from_the_table() {
        for b in BINDINGS {
            if let Scope::Tab(t) = b.scope {
                assert!(Tab::all().any(|r| r == t), "{t:?} is not in TABS");
            }
        }
        assert_eq!(
            status_hints(Tab::Stragglers),
            "Enter timeline  n ] step  m measure  s → sort  S ← reverse"
        );
        assert!(status_hints(Tab::Timeline).starts_with("+ zoom  - out"));
        // Number keys follow the registry; past its end they do nothing.
        let digit = |c| key_action(&key(Char(c)), Tab::Summary, Mode::Normal);
        assert_eq!(digit('5'), Some(Action::SelectTab(Tab::Memory)));
        assert_eq!(digit('9'), None);
    }

    #[test]
    fn keys_by_tab_and_mode() {
        assert_eq!(
            key_action(&key(Char('q')), Tab::Summary, Mode::Normal),
            Some(Action::Quit)
        );
        assert_eq!(
            key_action(&key(Char('3')), Tab::Kernels, Mode::Normal),
            Some(Action::SelectTab(Tab::Timeline))
        );
        assert_eq!(
            key_action(&key(Char('+')), Tab::Timeline, Mode::Normal),
            Some(Action::ZoomIn)
        );
        assert_eq!(
            key_action(&key(Char('+')), Tab::Kernels, Mode::Normal),
            None
        );
        assert_eq!(
            key_action(&key(Left), Tab::Timeline, Mode::Normal),
            Some(Action::PanLeft)
        );
        assert_eq!(
            key_action(&key(Left), Tab::Kernels, Mode::Normal),
            Some(Action::ReverseSort)
        );
        assert_eq!(
            key_action(&key(Char('q')), Tab::Kernels, Mode::Typing),
            Some(Action::Input('q'))
        );
        assert_eq!(
            key_action(&key(Esc), Tab::Kernels, Mode::Typing),
            Some(Action::Back)
        );
        let ctrl_c = KeyEvent::new(Char('c'), KeyModifiers::CONTROL);
        assert_eq!(
            key_action(&ctrl_c, Tab::Kernels, Mode::Typing),
            Some(Action::Quit)
        );
    }

    #[test]
    fn no_key_bound_twice_in_one_scope() {
        for (i, a) in BINDINGS.iter().enumerate() {
            for b in &BINDINGS[i + 1..] {
                let clash = a.scope == b.scope && a.keys.iter().any(|k| b.keys.contains(k));
                assert!(!clash, "{} and {} share a key", a.label, b.label);
            }
        }
    }
}
