//! Colours and glyphs. Only the 16 basic ANSI colours are used, so any terminal
//! shows them; with `NO_COLOR` set everything is drawn in the default colours and
//! told apart by glyphs and bold/reverse/dim instead.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Default for Theme {
    fn default() -> Self {
        Self { color: true }
    }
}

/// What a timeline cell shows. Distinct glyphs keep them apart without colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shade {
    Idle,
    Compute,
    Comm,
    /// Communication waiting for the last rank of the collective to arrive.
    Wait,
    Overlap,
    Memory,
    /// CPU lanes: an operator or annotation range running on the thread.
    CpuOp,
    /// CPU lanes: a CUDA/HIP runtime call (launch, copy, synchronize).
    Runtime,
}

impl Shade {
    pub(crate) fn glyph(self) -> &'static str {
        match self {
            Self::Idle => " ",
            Self::Compute => "█",
            Self::Comm => "░",
            Self::Wait => "╌",
            Self::Overlap => "▓",
            Self::Memory => "▪",
            Self::CpuOp => "▒",
            Self::Runtime => "▞",
        }
    }

    /// The glyph drawn for a fully busy cell: without colour the kind is told
    /// by its glyph; with colour every kind is a full block in its colour, so
    /// a cell's height alone reads as how busy it was, except waiting, which
    /// is hatched: a hue alone is lost in themes that draw two reds alike.
    pub(crate) fn full_glyph(self, theme: Theme) -> &'static str {
        match self {
            Self::Idle => self.glyph(),
            _ if !theme.color => self.glyph(),
            Self::Wait => "▒",
            _ => "█",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Compute => "compute",
            Self::Comm => "communication",
            Self::Wait => "waiting in a collective",
            Self::Overlap => "overlap",
            Self::Memory => "memcpy/memset",
            Self::CpuOp => "CPU op",
            Self::Runtime => "runtime call",
        }
    }
}

/// A full cell of bytes allocated in `p`: a block in colour, and without
/// colour a pattern per phase.
pub(crate) fn phase_glyph(p: crate::model::memory::Phase, theme: Theme) -> &'static str {
    use crate::model::memory::Phase;
    if theme.color {
        return "█";
    }
    match p {
        Phase::Before => "▓",
        Phase::Forward => "█",
        Phase::Backward => "▒",
        Phase::Optimizer => "░",
        Phase::Other => "▞",
    }
}

/// Partial blocks, one to seven eighths of a cell high.
pub(crate) const EIGHTHS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty (no-color.org).
    pub(crate) fn from_env() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self { color: !no_color }
    }

    pub fn mono() -> Self {
        Self { color: false }
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    pub(crate) fn shade(self, s: Shade) -> Style {
        match s {
            Shade::Idle => Style::new(),
            Shade::Compute => self.fg(Color::Blue),
            Shade::Comm => self.fg(Color::LightRed),
            // Amber, not a second red: many themes draw red and bright red alike.
            Shade::Wait => self.fg(Color::Yellow),
            Shade::Overlap => self.fg(Color::Magenta),
            Shade::Memory => self.fg(Color::Gray),
            Shade::CpuOp => self.fg(Color::Cyan),
            Shade::Runtime => self.fg(Color::Green),
        }
    }

    /// The Memory tab's bytes allocated in `p`: a colour, and without
    /// colour a glyph of its own (see [`phase_glyph`]).
    pub(crate) fn phase(self, p: crate::model::memory::Phase) -> Style {
        use crate::model::memory::Phase;
        match p {
            Phase::Before => self.fg(Color::Gray),
            Phase::Forward => self.fg(Color::Blue),
            Phase::Backward => self.fg(Color::Magenta),
            Phase::Optimizer => self.fg(Color::Yellow),
            Phase::Other => self.fg(Color::Cyan),
        }
    }

    pub(crate) fn title(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub(crate) fn header(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    }

    pub(crate) fn key(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub(crate) fn dim(self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }

    pub(crate) fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    pub(crate) fn tab_active(self) -> Style {
        self.fg(Color::Black)
            .bg(if self.color {
                Color::Cyan
            } else {
                Color::Reset
            })
            .add_modifier(if self.color {
                Modifier::BOLD
            } else {
                Modifier::BOLD | Modifier::REVERSED
            })
    }

    /// The slowest rank, a warning.
    pub(crate) fn alert(self) -> Style {
        self.fg(Color::LightRed).add_modifier(Modifier::BOLD)
    }

    pub(crate) fn good(self) -> Style {
        self.fg(Color::Green)
    }

    pub(crate) fn bar(self) -> Style {
        self.fg(Color::Cyan)
    }

    pub(crate) fn cursor(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub(crate) fn error(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
}
