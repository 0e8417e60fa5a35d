//! The terminal UI: load in a background thread while showing progress, then an
//! Elm-style loop (event → `Action` → `App::update` → draw). No async runtime:
//! nothing here waits on more than one thing.

pub mod action;
pub mod app;
pub mod data;
pub mod keymap;
pub mod lane;
pub mod loading;
pub(crate) mod memory_view;
pub mod paged;
pub mod pair;
pub(crate) mod queue;
pub mod registry;
pub mod screenshot;
pub mod step_grid;
pub mod svg;
pub mod tab;
pub mod tabs;
pub mod theme;
pub mod widgets;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::DefaultTerminal;

use crate::metrics::Options;
use crate::session::load::{LoadOptions, Progress};
use crate::session::{self, Need};
use app::App;
use data::Data;
use pair::Pair;
use theme::Theme;

/// Discovers and loads a trace into the view data (used by the TUI and screenshots).
pub fn load_data(
    path: &Path,
    load: &LoadOptions,
    opts: Options,
    progress: &Progress,
) -> Result<Data> {
    // The UI draws the CPU lanes.
    let load = LoadOptions {
        cpu_ranges: true,
        ..load.clone()
    };
    let run = session::open(path, &load, Need::Screen, progress)?;
    if run.pages.is_none() {
        return Ok(Data::new(run.trace, run.report, run.matched, opts));
    }
    let ops: usize = run.stats.iter().flatten().map(|s| s.ops).sum();
    let ranks = run.trace.ranks.len();
    let spilled = (run.trace.ranks.iter())
        .filter(|t| t.ops.is_spilled())
        .count();
    // Why the stored lanes may not be drawn, said with the refusal.
    let unbinned = (run.report.first(crate::model::warning::Kind::NotRebinned))
        .map(|w| format!(" ({w})"))
        .unwrap_or_default();
    let mut d = Data::paged(run, opts).map_err(|why| {
        anyhow::anyhow!("{}: cannot open in pages: {why}{unbinned}", path.display())
    })?;
    d.notes.push(format!(
        "the Timeline reads the summary's {ops} ops a window at a time (--pages never reads them all)"
    ));
    if spilled > 0 {
        d.notes.push(format!(
            "the collectives of {spilled} of {ranks} ranks are kept in a temporary file (in TMPDIR), not in memory"
        ));
    }
    Ok(d)
}

/// What the UI opens: one run, or two to compare.
pub(crate) enum Loaded {
    One(Box<Data>),
    Two(Pair),
}

impl Loaded {
    pub(crate) fn into_app(self, theme: Theme, size: (u16, u16)) -> App {
        match self {
            Self::One(d) => App::new(Arc::new(*d), theme, size),
            Self::Two(p) => App::with_pair(p, theme, size),
        }
    }
}

/// Loads one run, or two (one after the other, sharing `progress`) and their
/// comparison with changes beyond `threshold` marked.
pub(crate) fn load_runs(
    paths: &[PathBuf],
    load: &LoadOptions,
    opts: Options,
    threshold: f64,
    progress: &Progress,
) -> Result<Loaded> {
    match paths {
        [one] => Ok(Loaded::One(Box::new(load_data(one, load, opts, progress)?))),
        [a, b] => {
            let a = load_data(a, load, opts, progress)?;
            let b = load_data(b, load, opts, progress)?;
            Ok(Loaded::Two(Pair::new(a, b, opts, threshold)))
        }
        _ => anyhow::bail!("the UI opens one run, or two to compare"),
    }
}

enum Screen {
    Loading(thread::JoinHandle<Result<Loaded>>),
    Failed(String),
    Ready(Box<App>),
}

/// Runs the UI on one run (or two to compare) until the user quits. A load error
/// is shown in the UI and then returned, so the exit status says the trace could
/// not be read.
pub(crate) fn run(
    paths: Vec<PathBuf>,
    load: LoadOptions,
    opts: Options,
    threshold: f64,
) -> Result<()> {
    let theme = Theme::from_env();
    let progress = Arc::new(Progress::default());
    let source = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    let loader = {
        let progress = Arc::clone(&progress);
        thread::spawn(move || load_runs(&paths, &load, opts, threshold, &progress))
    };
    let mut terminal = ratatui::try_init().context("cannot start the terminal UI")?;
    // ratatui's panic hook restores the screen; mouse capture must go too.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(io::stdout(), DisableMouseCapture);
        hook(info);
    }));
    let _ = execute!(io::stdout(), EnableMouseCapture);
    let result = event_loop(
        &mut terminal,
        Screen::Loading(loader),
        source,
        &progress,
        theme,
    );
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut DefaultTerminal,
    mut screen: Screen,
    source: String,
    progress: &Progress,
    theme: Theme,
) -> Result<()> {
    let mut dirty = true;
    loop {
        if let Screen::Loading(h) = &screen {
            if h.is_finished() {
                let Screen::Loading(h) = screen else {
                    unreachable!()
                };
                screen = match h.join() {
                    Ok(Ok(loaded)) => {
                        let size = terminal.size()?;
                        Screen::Ready(Box::new(loaded.into_app(theme, (size.width, size.height))))
                    }
                    Ok(Err(e)) => Screen::Failed(crate::error::one_line(&e)),
                    Err(_) => Screen::Failed(format!("{source}: the loader crashed")),
                };
                dirty = true;
            }
        }
        if dirty {
            terminal.draw(|f| match &screen {
                Screen::Loading(_) => f.render_widget(
                    loading::Loading {
                        source: &source,
                        progress,
                        theme,
                    },
                    f.area(),
                ),
                Screen::Failed(m) => {
                    f.render_widget(loading::Failed { message: m, theme }, f.area())
                }
                Screen::Ready(app) => f.render_widget(&**app, f.area()),
            })?;
        }
        // While loading, redraw a few times a second for the progress numbers.
        let tick = if matches!(screen, Screen::Loading(_)) {
            100
        } else {
            250
        };
        if !event::poll(Duration::from_millis(tick))? {
            dirty = matches!(screen, Screen::Loading(_));
            continue;
        }
        let ev = event::read()?;
        dirty = true;
        match &mut screen {
            Screen::Ready(app) => {
                if let Some(a) = keymap::action_for(&ev, app.tab, app.mode()) {
                    app.update(a);
                }
                if app.quit {
                    return Ok(());
                }
            }
            Screen::Loading(_) | Screen::Failed(_) => {
                if let Some(action::Action::Quit | action::Action::Back) =
                    keymap::action_for(&ev, tabs::Tab::default(), keymap::Mode::Normal)
                {
                    if let Screen::Failed(m) = screen {
                        anyhow::bail!(m);
                    }
                    return Ok(());
                }
            }
        }
    }
}
