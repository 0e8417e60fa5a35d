//! Time lanes and their ruler, shared by the Timeline and Compare tabs: each
//! screen column is drawn from prefix-sum coverage indexes, so a lane costs
//! O(columns × log events) at any zoom.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Widget;

use crate::model::time::human_tick;
use crate::model::{Interval, Ns};
use crate::tui::data::Lane;
use crate::tui::theme::{Shade, Theme, EIGHTHS};
use crate::tui::widgets::fit;

/// Time at the left edge of column `c` of a `width`-column view.
pub fn col_time(view: Interval, width: u16, c: u16) -> Ns {
    let w = i128::from(width.max(1));
    let (start, len) = (i128::from(view.start.get()), i128::from(view.len().get()));
    Ns((start + len * i128::from(c) / w) as i64)
}

/// `len` from `start`, kept inside `full` and at least a nanosecond per
/// column: the view a Timeline-like tab shows.
pub(crate) fn fit_view(full: Interval, start: Ns, len: Ns, width: u16) -> Interval {
    let len = (Ns(1) * i64::from(width.max(1)))
        .max(len)
        .min(full.len().max(Ns(1)));
    let start = start.clamp(full.start, full.end - len);
    Interval::new(start, start + len)
}

/// `view` scaled by `factor` about `at`, which keeps its place on screen:
/// the new (start, length).
pub(crate) fn zoom_about(view: Interval, factor: f64, at: Ns) -> (Ns, Ns) {
    let len = Ns::rounded(view.len().as_f64() * factor);
    let frac = (at - view.start).as_f64() / view.len().max(Ns(1)).as_f64();
    (at - Ns::rounded(len.as_f64() * frac), len)
}

/// `view` moved an eighth of its width left or right, inside `full`.
pub(crate) fn panned(full: Interval, view: Interval, left: bool, width: u16) -> Interval {
    let d = (view.len() / 8).max(Ns(1));
    let d = if left { -d } else { d };
    fit_view(full, view.start + d, view.len(), width)
}

/// The cursor moved `by` (a column's time, signed) inside `full`, and the
/// view recentred on it when it left the view.
pub(crate) fn moved_cursor(
    full: Interval,
    (view, cursor): (Interval, Ns),
    by: Ns,
    width: u16,
) -> (Interval, Ns) {
    let cursor = (cursor + by).clamp(full.start, full.end - Ns(1));
    if cursor < view.start || cursor >= view.end {
        let view = fit_view(full, cursor - view.len() / 2, view.len(), width);
        return (view, cursor);
    }
    (view, cursor)
}

/// The column showing time `t`, if visible.
pub(crate) fn time_col(view: Interval, width: u16, t: Ns) -> Option<u16> {
    if t < view.start || t >= view.end || width == 0 {
        return None;
    }
    let c = i128::from((t - view.start).get()) * i128::from(width)
        / i128::from(view.len().max(Ns(1)).get());
    Some(c as u16)
}

/// The column `draw_lane` draws time `t` in: the one whose slice
/// `[col_time(c), col_time(c + 1))` holds it ([`time_col`] can land one
/// column early, its division rounding the other way).
fn drawn_col(view: Interval, width: u16, t: Ns) -> Option<u16> {
    let c = time_col(view, width, t)?;
    Some(if c + 1 < width && col_time(view, width, c + 1) <= t {
        c + 1
    } else {
        c
    })
}

/// What one timeline cell shows: the kind of activity covering most of it and
/// the share of its time the device was busy with anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub shade: Shade,
    /// Busy time / cell time, 0 to 1.
    pub busy: f64,
}

impl Cell {
    /// Eighths of a `rows`-row cell to fill: at least one when anything ran,
    /// so a single short kernel stays visible; all of them only when the
    /// device was busy for (nearly) the whole cell.
    pub(crate) fn eighths(&self, rows: u16) -> u32 {
        let total = 8 * u32::from(rows.max(1));
        if self.busy <= 0.0 {
            return 0;
        }
        ((self.busy * f64::from(total)).round() as u32).clamp(1, total)
    }
}

/// What a lane shows over each `[lo, hi)` of `slices`: the kind of activity
/// covering most of it, and how busy it was.
pub fn shades(lane: &Lane, slices: &[(Ns, Ns)]) -> Vec<Cell> {
    if lane.cpu.is_some() {
        return cpu_shades(lane, slices);
    }
    let [overlap, comm, wait, compute, memory, busy] = [
        &lane.overlap,
        &lane.comm,
        &lane.wait,
        &lane.compute,
        &lane.memory,
        &lane.busy,
    ]
    .map(|c| c.covered_slices(slices));
    (0..slices.len())
        .map(|k| {
            let comm = comm[k] - overlap[k];
            // Waiting is communication time too; show it where compute does not hide it.
            let wait = wait[k].min(comm);
            let shade = [
                (overlap[k], Shade::Overlap),
                (wait, Shade::Wait),
                (comm - wait, Shade::Comm),
                (compute[k] - overlap[k], Shade::Compute),
                (memory[k], Shade::Memory),
            ]
            .into_iter()
            .filter(|(v, _)| *v > Ns::ZERO)
            // First of equals wins: the order above is the priority.
            .fold(None, |best: Option<(Ns, Shade)>, (v, s)| match best {
                Some((b, _)) if b >= v => best,
                _ => Some((v, s)),
            })
            .map_or(Shade::Idle, |(_, s)| s);
            let (lo, hi) = slices[k];
            let busy = (busy[k].as_f64() / (hi - lo).max(Ns(1)).as_f64()).clamp(0.0, 1.0);
            Cell { shade, busy }
        })
        .collect()
}

/// A CPU lane's cells: runtime calls where they take half the busy time of
/// the column or more (they run inside operators: a launch inside
/// `aten::addmm`, a synchronize the CPU blocks in), operators otherwise.
fn cpu_shades(lane: &Lane, slices: &[(Ns, Ns)]) -> Vec<Cell> {
    let [ops, runtime, busy] =
        [&lane.compute, &lane.comm, &lane.busy].map(|c| c.covered_slices(slices));
    (0..slices.len())
        .map(|k| {
            let shade = match (runtime[k], ops[k]) {
                (Ns::ZERO, Ns::ZERO) => Shade::Idle,
                (r, _) if r * 2 >= busy[k] => Shade::Runtime,
                _ => Shade::CpuOp,
            };
            let (lo, hi) = slices[k];
            let busy = (busy[k].as_f64() / (hi - lo).max(Ns(1)).as_f64()).clamp(0.0, 1.0);
            Cell { shade, busy }
        })
        .collect()
}

/// A round tick interval (1, 2 or 5 × 10^k ns) at least `min` long.
pub(crate) fn tick_step(min: Ns) -> Ns {
    let mut step: Ns = Ns(1);
    loop {
        for m in [1, 2, 5] {
            if step * m >= min {
                return step * m;
            }
        }
        // Past 10^18 ns (31 years) a wider tick would overflow: that one will do.
        match step.checked_mul(10) {
            Some(s) if s <= Ns::MAX / 5 => step = s,
            _ => return step * 5,
        }
    }
}

/// Draws `lane` over the time range `view` into `r`, one column per slice of
/// time, the column `cursor` reversed.
pub(crate) fn draw_lane(
    lane: &Lane,
    view: Interval,
    r: Rect,
    cursor: Option<u16>,
    theme: Theme,
    buf: &mut Buffer,
) {
    let slices: Vec<(Ns, Ns)> = (0..r.width)
        .map(|c| {
            let lo = col_time(view, r.width, c);
            (lo, col_time(view, r.width, c + 1).max(lo + Ns(1)))
        })
        .collect();
    for (c, cell) in (0..r.width).zip(shades(lane, &slices)) {
        let style = theme.shade(cell.shade);
        let full = cell.shade.full_glyph(theme);
        // A vertical bar over the lane's rows: its height is the busy share.
        let filled = cell.eighths(r.height);
        let saturated = filled == 8 * u32::from(r.height.max(1));
        for dy in 0..r.height {
            // Eighths below this row's bottom edge (rows counted from the bottom).
            let below = 8 * u32::from(r.height - 1 - dy);
            let glyph = match filled.saturating_sub(below) {
                0 => " ",
                n if n >= 8 && saturated => full,
                n if n >= 8 => "█",
                n => EIGHTHS[n as usize - 1],
            };
            if let Some(cell) = buf.cell_mut((r.x + c, r.y + dy)) {
                cell.set_symbol(glyph).set_style(style);
                if cursor == Some(c) {
                    cell.modifier.insert(Modifier::REVERSED);
                }
            }
        }
    }
}

/// Names inside the ops wide enough to hold some of one (at least
/// `MIN_NAME_COLS` columns), on the lane's first row: `ops` are (start, end,
/// name) on the lane's clock. Wider ops are drawn last, so they win overlaps.
pub(crate) fn draw_names(
    ops: &mut [(Ns, Ns, String)],
    view: Interval,
    r: Rect,
    theme: Theme,
    buf: &mut Buffer,
) {
    ops.sort_by_key(|o| o.1 - o.0);
    for (start, end, name) in ops.iter() {
        let first = drawn_col(view, r.width, (*start).max(view.start));
        let last = drawn_col(view, r.width, (*end - Ns(1)).min(view.end - Ns(1)));
        let (Some(first), Some(last)) = (first, last) else {
            continue;
        };
        let cols = last - first + 1;
        if cols < MIN_NAME_COLS {
            continue;
        }
        // One column of the op's own shade stays on each side.
        let text = Line::styled(fit(name, usize::from(cols - 2)), theme.title());
        // Only the cells the name covers change: the bar after it keeps its
        // glyphs and colours (recolouring them drew busy time black).
        let at = Rect::new(r.x + first + 1, r.y, (text.width() as u16).min(cols - 2), 1);
        let under: Vec<(bool, Color)> = (at.x..at.right())
            .map(|x| {
                buf.cell((x, at.y))
                    .map_or((false, Color::Reset), |c| (c.symbol() == "█", c.fg))
            })
            .collect();
        text.render(at, buf);
        // With colour, a letter on a full cell is written on the bar's own
        // colour, so the bar reads as one piece; on a partly filled cell in
        // the bar's colour; without colour, as text over the lane.
        for (x, (full, shade)) in (at.x..at.right()).zip(under) {
            let style = match (full, shade) {
                (_, Color::Reset) => continue,
                (true, c) => Style::new().fg(Color::Black).bg(c),
                (false, c) => Style::new().fg(c),
            };
            if let Some(cell) = buf.cell_mut((x, at.y)) {
                cell.set_style(style);
            }
        }
    }
}

/// The narrowest op that gets its name drawn inside it, in columns.
pub(crate) const MIN_NAME_COLS: u16 = 6;

/// Step starts on the ruler's tick row: `│` and the step's label, for each
/// (start, label) in view.
pub(crate) fn render_step_marks(
    view: Interval,
    steps: &[(Ns, String)],
    r: Rect,
    theme: Theme,
    buf: &mut Buffer,
) {
    if r.height == 0 || r.width == 0 {
        return;
    }
    let row = r.y + r.height - 1;
    let cols: Vec<(u16, &String)> = steps
        .iter()
        .filter_map(|(t, label)| Some((time_col(view, r.width, *t)?, label)))
        .collect();
    for (k, (c, label)) in cols.iter().enumerate() {
        let next = cols.get(k + 1).map_or(r.width, |n| n.0);
        let room = next.saturating_sub(*c);
        if room == 0 {
            continue;
        }
        let text = format!("│{label}");
        Line::styled(fit(&text, usize::from(room)), theme.key())
            .render(Rect::new(r.x + c, row, room, 1), buf);
    }
}

/// Tick marks and labels for `view`, labelled as time since `origin`.
pub(crate) fn render_ruler(view: Interval, origin: Ns, r: Rect, theme: Theme, buf: &mut Buffer) {
    if r.height == 0 || r.width == 0 {
        return;
    }
    let ns_per_col = (view.len().as_f64() / f64::from(r.width)).max(1e-9);
    let step = tick_step(Ns((ns_per_col * 14.0).ceil() as i64));
    let rel_start = view.start - origin;
    let mut t = step * rel_start.div_euclid(step);
    if t < rel_start {
        t += step;
    }
    let tick_row = r.y + r.height - 1;
    for c in 0..r.width {
        if let Some(cell) = buf.cell_mut((r.x + c, tick_row)) {
            cell.set_symbol("─").set_style(theme.dim());
        }
    }
    while t < view.end - origin {
        if let Some(c) = time_col(view, r.width, t + origin) {
            if let Some(cell) = buf.cell_mut((r.x + c, tick_row)) {
                cell.set_symbol("┬").set_style(theme.dim());
            }
            if r.height > 1 {
                let label = human_tick(t, step);
                let room = r.width - c;
                Line::raw(fit(&label, usize::from(room)))
                    .render(Rect::new(r.x + c, r.y, room, 1), buf);
            }
        }
        t += step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Coverage, IntervalSet};
    use ratatui::buffer::Buffer;

    fn cov(v: &[(Ns, Ns)]) -> Coverage {
        Coverage::new(IntervalSet::from_unsorted(
            v.iter().map(|&(a, b)| Interval::new(a, b)).collect(),
        ))
    }

    #[test]
    fn cpu_columns_show_runtime_calls_taking_half_or_more() {
        // Operators over [0, 100); a launch [10, 20) and a synchronize [50, 100) inside.
        let lane = Lane {
            rank_index: 0,
            rank: 0,
            stream: None,
            cpu: Some((1, 0)),
            queue: false,
            compute: cov(&[(Ns::ZERO, Ns(100))]),
            comm: cov(&[(Ns(10), Ns(20)), (Ns(50), Ns(100))]),
            overlap: cov(&[]),
            memory: cov(&[]),
            wait: cov(&[]).into(),
            busy: cov(&[(Ns::ZERO, Ns(100))]),
        };
        let cells = shades(
            &lane,
            &[
                (Ns::ZERO, Ns(40)),
                (Ns(40), Ns(80)),
                (Ns(80), Ns(100)),
                (Ns(100), Ns(200)),
            ],
        );
        let got: Vec<Shade> = cells.iter().map(|c| c.shade).collect();
        // 10 of 40 in calls; 30 of 40; 20 of 20; nothing.
        assert_eq!(
            got,
            [Shade::CpuOp, Shade::Runtime, Shade::Runtime, Shade::Idle]
        );
        assert!((cells[0].busy - 1.0).abs() < 1e-12 && cells[3].busy == 0.0);
    }

    #[test]
    fn column_shade_is_the_majority() {
        let lane = Lane {
            rank_index: 0,
            rank: 0,
            stream: None,
            cpu: None,
            queue: false,
            compute: cov(&[(Ns::ZERO, Ns(60))]),
            comm: cov(&[(Ns(50), Ns(100))]),
            overlap: cov(&[(Ns(50), Ns(60))]),
            memory: cov(&[(Ns(200), Ns(210))]),
            wait: cov(&[(Ns(60), Ns(75))]).into(),
            busy: cov(&[(Ns::ZERO, Ns(100)), (Ns(200), Ns(210))]),
        };
        // [40, 100): compute-only 10, overlap 10, comm-only 40 of which 15 waiting.
        let slices = [
            (0, 40),
            (50, 60),
            (40, 100),
            (60, 75),
            (100, 200),
            (150, 250),
        ]
        .map(|(a, b)| (Ns(a), Ns(b)));
        use Shade::*;
        let cells = shades(&lane, &slices);
        assert_eq!(
            cells.iter().map(|c| c.shade).collect::<Vec<_>>(),
            vec![Compute, Overlap, Comm, Wait, Idle, Memory]
        );
        // Busy: full, full, full, full, none, 10 of 100.
        let busy: Vec<f64> = cells.iter().map(|c| c.busy).collect();
        assert_eq!(busy, vec![1.0, 1.0, 1.0, 1.0, 0.0, 0.1]);
        // Adjacent columns, as drawn: [0, 50) compute, [50, 100) comm 40 vs overlap 10.
        let two = shades(&lane, &[(Ns::ZERO, Ns(50)), (Ns(50), Ns(100))]);
        assert_eq!((two[0].shade, two[1].shade), (Compute, Comm));
    }

    /// One lane, `busy` of every `period` ns running a compute kernel.
    fn duty_lane(busy: Ns, period: Ns, periods: i64) -> Lane {
        let k: Vec<(Ns, Ns)> = (0..periods)
            .map(|i| (period * i, period * i + busy))
            .collect();
        Lane {
            rank_index: 0,
            rank: 0,
            stream: None,
            cpu: None,
            queue: false,
            compute: cov(&k),
            comm: cov(&[]),
            overlap: cov(&[]),
            memory: cov(&[]),
            wait: cov(&[]).into(),
            busy: cov(&k),
        }
    }

    fn drawn(lane: &Lane, view: Interval, w: u16, h: u16, theme: Theme) -> Vec<String> {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        draw_lane(lane, view, buf.area, None, theme, &mut buf);
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    #[test]
    fn a_launch_bound_gpu_does_not_look_saturated() {
        // 26 % busy (24 µs kernels every 90 µs... as in a launch-bound MoE step):
        // each of 10 columns spans 10 periods, so each is 26 % busy.
        let lane = duty_lane(Ns(26), Ns(100), 100);
        let view = Interval::new(Ns::ZERO, Ns(10_000));
        for theme in [Theme::mono(), Theme::default()] {
            // One row: 0.26 × 8 = 2.08 → two eighths.
            assert_eq!(drawn(&lane, view, 10, 1, theme), vec!["▂".repeat(10)]);
            // Three rows: 0.26 × 24 = 6.24 → six eighths, on the bottom row.
            assert_eq!(
                drawn(&lane, view, 10, 3, theme),
                vec![" ".repeat(10), " ".repeat(10), "▆".repeat(10)]
            );
        }
        // Fully busy: the kind's glyph (without colour), a full block (with colour).
        let full = duty_lane(Ns(100), Ns(100), 100);
        assert_eq!(drawn(&full, view, 4, 1, Theme::mono()), vec!["████"]);
        // A single 1 ns kernel in a 1 µs column stays visible.
        let tiny = duty_lane(Ns(1), Ns(1000), 10);
        assert_eq!(
            drawn(&tiny, view, 10, 1, Theme::mono())[0].chars().next(),
            Some('▁')
        );
    }

    #[test]
    fn without_colour_full_cells_name_their_kind() {
        let mut lane = duty_lane(Ns::ZERO, Ns(100), 0);
        lane.comm = cov(&[(Ns::ZERO, Ns(100)), (Ns(200), Ns(250))]);
        lane.busy = cov(&[(Ns::ZERO, Ns(100)), (Ns(200), Ns(250))]);
        let view = Interval::new(Ns::ZERO, Ns(400));
        // Columns of 100 ns: full comm, idle, half comm, idle.
        assert_eq!(drawn(&lane, view, 4, 1, Theme::mono()), vec!["░ ▄ "]);
        assert_eq!(drawn(&lane, view, 4, 1, Theme::default()), vec!["█ ▄ "]);
    }

    #[test]
    fn waiting_differs_from_communication_in_hue_and_pattern() {
        // [0, 100) communication after every rank arrived, [100, 200) waiting
        // for the last one: two columns of 100 ns.
        let mut lane = duty_lane(Ns::ZERO, Ns(100), 0);
        lane.comm = cov(&[(Ns::ZERO, Ns(200))]);
        lane.busy = cov(&[(Ns::ZERO, Ns(200))]);
        lane.wait = cov(&[(Ns(100), Ns(200))]).into();
        let view = Interval::new(Ns::ZERO, Ns(200));
        let theme = Theme::default();
        let mut buf = Buffer::empty(Rect::new(0, 0, 2, 1));
        let area = buf.area;
        draw_lane(&lane, view, area, None, theme, &mut buf);
        assert_eq!(row(&buf, 0), "█▒");
        let (comm, wait) = (buf[(0, 0)].fg, buf[(1, 0)].fg);
        assert_eq!((comm, wait), (Color::LightRed, Color::Yellow));
        // Neither is a red the other could pass for.
        assert!(![Color::Red, Color::LightRed].contains(&wait));
        assert_eq!(drawn(&lane, view, 2, 1, Theme::mono()), vec!["░╌"]);
    }

    fn row(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect()
    }

    #[test]
    fn names_inside_wide_enough_ops() {
        // 20 columns of 10 ns over [0, 200).
        let named = |ops: &[(Ns, Ns, &str)]| {
            let mut buf = Buffer::empty(Rect::new(0, 0, 20, 1));
            let mut ops: Vec<(Ns, Ns, String)> =
                ops.iter().map(|&(a, b, n)| (a, b, n.to_owned())).collect();
            let area = buf.area;
            draw_names(
                &mut ops,
                Interval::new(Ns::ZERO, Ns(200)),
                area,
                Theme::mono(),
                &mut buf,
            );
            row(&buf, 0)
        };
        // A 100 ns op (10 columns) gets its name, cut to 8 columns inside one
        // column of margin; a 30 ns op (3 columns) none.
        assert_eq!(
            named(&[
                (Ns::ZERO, Ns(100), "all_reduce_kernel"),
                (Ns(120), Ns(150), "gemm")
            ]),
            " all_red…           "
        );
        // An op running past the view is named within what is visible.
        assert_eq!(named(&[(Ns(130), Ns(900), "long")]), "              long  ");
    }

    #[test]
    fn a_name_leaves_the_rest_of_its_bar_in_colour() {
        // A communication op busy over all 20 columns (1 row, colour), named
        // "ncclKernel": the name covers columns 1..=10; every other cell keeps
        // the full block in the communication colour, none turns black.
        let mut lane = duty_lane(Ns::ZERO, Ns(100), 0);
        lane.comm = cov(&[(Ns::ZERO, Ns(200))]);
        lane.busy = cov(&[(Ns::ZERO, Ns(200))]);
        let view = Interval::new(Ns::ZERO, Ns(200));
        let theme = Theme::default();
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 1));
        let area = buf.area;
        draw_lane(&lane, view, area, None, theme, &mut buf);
        let mut ops = vec![(Ns::ZERO, Ns(200), "ncclKernel".to_owned())];
        draw_names(&mut ops, view, area, theme, &mut buf);
        assert_eq!(row(&buf, 0), "█ncclKernel█████████");
        let comm = theme.shade(Shade::Comm).fg.expect("a colour");
        for x in 0..20 {
            let c = &buf[(x, 0)];
            if (1..=10).contains(&x) {
                assert_eq!((c.fg, c.bg), (Color::Black, comm), "letter at {x}");
            } else {
                assert_eq!((c.fg, c.bg), (comm, Color::Reset), "bar at {x}");
            }
        }
    }

    #[test]
    fn step_starts_on_the_ruler() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 2));
        let steps = [
            (Ns(-50), "step 1".to_owned()),
            (Ns(20), "step 2".to_owned()),
            (Ns(140), "step 3".to_owned()),
        ];
        render_step_marks(
            Interval::new(Ns::ZERO, Ns(200)),
            &steps,
            buf.area,
            Theme::mono(),
            &mut buf,
        );
        // Step 1 began before the view; each label ends where the next begins
        // or the ruler does.
        assert_eq!(row(&buf, 1), "  │step 2     │step…");
    }

    #[test]
    fn ticks_and_columns() {
        assert_eq!(tick_step(Ns(1)), Ns(1));
        // A view wider than any trace the model keeps still gets a tick.
        assert_eq!(tick_step(Ns::MAX), Ns(5_000_000_000_000_000_000));
        assert_eq!(tick_step(Ns(3)), Ns(5));
        assert_eq!(tick_step(Ns(1_100)), Ns(2_000));
        let v = Interval::new(Ns(1000), Ns(2000));
        assert_eq!(col_time(v, 10, 0), Ns(1000));
        assert_eq!(col_time(v, 10, 10), Ns(2000));
        assert_eq!(time_col(v, 10, Ns(1550)), Some(5));
        assert_eq!(time_col(v, 10, Ns(2000)), None);
    }
}
