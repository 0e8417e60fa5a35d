//! A plain table: fixed-width columns plus one flexible column, a sort marker on
//! the sorted header, the selected row reversed. Column positions are computed
//! here and nowhere else, so header clicks map back to the same columns.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::tui::action::Action;
use crate::tui::theme::Theme;

#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub title: &'static str,
    /// Cells; 0 = takes the width the others leave.
    pub width: u16,
    pub right: bool,
}

pub(crate) const fn col(title: &'static str, width: u16, right: bool) -> Column {
    Column {
        title,
        width,
        right,
    }
}

pub struct Row<'a> {
    pub cells: Vec<Span<'a>>,
    pub style: Style,
}

pub struct Table<'a> {
    pub columns: &'a [Column],
    pub rows: Vec<Row<'a>>,
    pub selected: Option<usize>,
    /// Sorted column and whether descending.
    pub sort: Option<(usize, bool)>,
    pub theme: Theme,
}

/// Each column's width within `total` cells (one space between columns).
pub(crate) fn widths(columns: &[Column], total: u16) -> Vec<u16> {
    let fixed: u16 =
        columns.iter().map(|c| c.width).sum::<u16>() + columns.len().saturating_sub(1) as u16;
    let flex = total.saturating_sub(fixed).max(8);
    columns
        .iter()
        .map(|c| if c.width == 0 { flex } else { c.width })
        .collect()
}

/// The column under x (relative to the table's left edge).
pub(crate) fn column_at(columns: &[Column], total: u16, x: u16) -> Option<usize> {
    let mut left = 0u16;
    for (i, w) in widths(columns, total).into_iter().enumerate() {
        if x >= left && x < left.saturating_add(w) {
            return Some(i);
        }
        left = left.saturating_add(w + 1);
    }
    None
}

/// What a click at (col, row) in a table drawn in `area` landed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hit {
    /// A column header.
    Header(usize),
    /// A data row, by index into the rows (scrolling accounted for).
    Row(usize),
}

pub(crate) fn hit(
    columns: &[Column],
    area: Rect,
    selected: usize,
    rows: usize,
    col: u16,
    row: u16,
) -> Option<Hit> {
    if row == area.y {
        return column_at(columns, area.width, col.saturating_sub(area.x)).map(Hit::Header);
    }
    if row > area.y && row < area.bottom() {
        let first = offset(selected, usize::from(area.height - 1));
        let i = first + usize::from(row - area.y - 1);
        return (i < rows).then_some(Hit::Row(i));
    }
    None
}

/// First row shown so that `selected` is visible in `height` rows (header excluded).
/// Where a row selection moves for `action` in a list of `last + 1` rows
/// showing `page` at a time; `None` when the action is not a move.
pub(crate) fn moved(selected: usize, action: &Action, page: usize, last: usize) -> Option<usize> {
    Some(match action {
        Action::Up | Action::ScrollUp { .. } => selected.saturating_sub(1),
        Action::Down | Action::ScrollDown { .. } => (selected + 1).min(last),
        Action::PageUp => selected.saturating_sub(page),
        Action::PageDown => (selected + page).min(last),
        Action::Home => 0,
        Action::End => last,
        _ => return None,
    })
}

pub(crate) fn offset(selected: usize, visible: usize) -> usize {
    if visible == 0 {
        return selected;
    }
    (selected + 1).saturating_sub(visible)
}

impl Widget for Table<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let w = widths(self.columns, area.width);
        let header: Vec<Span> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mark = match self.sort {
                    Some((s, true)) if s == i => "▼",
                    Some((s, false)) if s == i => "▲",
                    _ => "",
                };
                Span::styled(format!("{}{mark}", c.title), self.theme.header())
            })
            .collect();
        render_row(&header, self.columns, &w, Style::new(), area, area.y, buf);
        let visible = usize::from(area.height - 1);
        let first = self.selected.map_or(0, |s| offset(s, visible));
        for (k, row) in self.rows.iter().skip(first).take(visible).enumerate() {
            let y = area.y + 1 + k as u16;
            let style = if self.selected == Some(first + k) {
                row.style.patch(self.theme.selected())
            } else {
                row.style
            };
            render_row(&row.cells, self.columns, &w, style, area, y, buf);
        }
    }
}

fn render_row(
    cells: &[Span],
    columns: &[Column],
    widths: &[u16],
    style: Style,
    area: Rect,
    y: u16,
    buf: &mut Buffer,
) {
    let line_area = Rect::new(area.x, y, area.width, 1);
    buf.set_style(line_area, style);
    let mut x = area.x;
    for ((cell, c), &w) in cells.iter().zip(columns).zip(widths) {
        if x >= area.right() {
            break;
        }
        let w = w.min(area.right() - x);
        // The flexible column holds names: cut them in the middle.
        let text = if c.width == 0 {
            super::fit_middle(&cell.content, usize::from(w))
        } else {
            super::fit(&cell.content, usize::from(w))
        };
        let pad = usize::from(w).saturating_sub(text.chars().count());
        let shown = if c.right {
            format!("{}{text}", " ".repeat(pad))
        } else {
            text
        };
        Line::from(Span::styled(shown, cell.style))
            .style(style)
            .render(Rect::new(x, y, w, 1), buf);
        x = x.saturating_add(w + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [Column; 3] = [col("name", 0, false), col("n", 3, true), col("t", 5, true)];

    #[test]
    fn layout_and_hits() {
        // 20 cells: fixed 3 + 5 + 2 spaces = 10, name gets 10.
        assert_eq!(widths(&COLS, 20), vec![10, 3, 5]);
        assert_eq!(column_at(&COLS, 20, 0), Some(0));
        assert_eq!(column_at(&COLS, 20, 10), None);
        assert_eq!(column_at(&COLS, 20, 11), Some(1));
        assert_eq!(column_at(&COLS, 20, 15), Some(2));
        assert_eq!(offset(0, 5), 0);
        // Header at y = 2, three rows visible below it, row 7 selected: rows 5..8 shown.
        let area = Rect::new(0, 2, 20, 4);
        assert_eq!(hit(&COLS, area, 7, 9, 12, 2), Some(Hit::Header(1)));
        assert_eq!(hit(&COLS, area, 7, 9, 0, 3), Some(Hit::Row(5)));
        assert_eq!(hit(&COLS, area, 7, 9, 0, 5), Some(Hit::Row(7)));
        assert_eq!(hit(&COLS, area, 7, 7, 0, 5), None);
        assert_eq!(hit(&COLS, area, 7, 9, 0, 6), None);
        assert_eq!(offset(7, 5), 3);
    }

    #[test]
    fn renders_header_rows_and_selection() {
        let rows = vec![
            Row {
                cells: vec![
                    Span::raw("gemm_kernel_long_name"),
                    Span::raw("2"),
                    Span::raw("1.0"),
                ],
                style: Style::new(),
            },
            Row {
                cells: vec![Span::raw("nccl"), Span::raw("10"), Span::raw("0.5")],
                style: Style::new(),
            },
        ];
        let t = Table {
            columns: &COLS,
            rows,
            selected: Some(1),
            sort: Some((2, true)),
            theme: Theme::mono(),
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 3));
        t.render(buf.area, &mut buf);
        let text: Vec<String> = (0..3)
            .map(|y| (0..20).map(|x| buf[(x, y)].symbol().to_owned()).collect())
            .collect();
        assert_eq!(
            text,
            vec![
                "name         n    t▼",
                "gemm_kern…   2   1.0",
                "nccl        10   0.5"
            ]
        );
        assert!(buf[(0, 2)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED));
    }
}
