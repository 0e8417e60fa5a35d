//! Renders the UI without a terminal (`--screenshot FILE --tab T --size WxH`),
//! to SVG through `svg`.

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;

use std::path::Path;

use anyhow::Result;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Action;
use super::app::App;
use super::svg::buffer_to_svg;
use super::tabs::Tab;
use super::theme::Theme;
use crate::cli::Cli;
use crate::headless::EXIT_USAGE;
use crate::session::load::Progress;

/// Draws `app` into an off-screen buffer of `width` × `height` cells.
pub(crate) fn render(app: &mut App, width: u16, height: u16) -> Buffer {
    app.update(Action::Resize { width, height });
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    terminal
        .draw(|f| f.render_widget(&*app, f.area()))
        .expect("test backend draws");
    terminal.backend().buffer().clone()
}

/// Renders one tab of the UI to an SVG file (`--screenshot FILE --tab T --size WxH`).
pub(crate) fn write(cli: &Cli, out: &Path) -> Result<u8> {
    let Some(tab) = Tab::parse(&cli.tab) else {
        crate::say!(
            "ccl-bench: unknown tab '{}'; tabs: {}",
            cli.tab,
            Tab::names()
        );
        return Ok(EXIT_USAGE);
    };
    let Some((w, h)) = cli.screenshot_size().filter(|&(w, h)| w > 0 && h > 0) else {
        crate::say!(
            "ccl-bench: --size wants WIDTHxHEIGHT in cells, e.g. 120x36, at most 1000x1000"
        );
        return Ok(EXIT_USAGE);
    };
    if cli.trace_path().is_none() {
        crate::say!("ccl-bench: --screenshot needs --trace DIR");
        return Ok(EXIT_USAGE);
    }
    let loaded = super::load_runs(
        &cli.runs(),
        &cli.load_options(),
        cli.options(),
        cli.threshold,
        &Progress::default(),
    )?;
    let mut app = loaded.into_app(Theme::from_env(), (w, h));
    let runs = match &app.pair {
        Some(p) => vec![&p.a, &p.b],
        None => vec![&app.data],
    };
    for w in runs.iter().flat_map(|d| &d.warnings) {
        crate::say!("warning: {w}");
    }
    if !app.tabs().contains(&tab) {
        crate::say!(
            "ccl-bench: the {} tab needs {}",
            tab.title(),
            tab.spec().needs.describe()
        );
        return Ok(EXIT_USAGE);
    }
    app.tab = tab;
    for c in cli.keys.chars() {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        if let Some(a) = super::keymap::key_action(&key, app.tab, app.mode()) {
            app.update(a);
        }
    }
    let buf = render(&mut app, w, h);
    crate::atomic::write(out, buffer_to_svg(&buf).as_bytes())?;
    Ok(0)
}
