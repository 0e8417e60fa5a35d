//! A screen as SVG, one monospace cell per buffer cell in the colours a dark
//! terminal shows, and as plain text: what `w` writes and `--screenshot`
//! draws. `scripts/screenshots.sh` turns the SVGs into the README's PNGs.

use std::fmt::Write;
use std::path::Path;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const CELL_W: u32 = 9;
const CELL_H: u32 = 18;
const FG: &str = "#d4d4d4";
const BG: &str = "#1e1e1e";

fn hex(c: Color, default: &'static str) -> &'static str {
    match c {
        Color::Black => "#000000",
        Color::Red => "#cd3131",
        Color::Green => "#0dbc79",
        Color::Yellow => "#e5e510",
        Color::Blue => "#2472c8",
        Color::Magenta => "#bc3fbc",
        Color::Cyan => "#11a8cd",
        Color::Gray => "#e5e5e5",
        Color::DarkGray => "#767676",
        Color::LightRed => "#f14c4c",
        Color::LightGreen => "#23d18b",
        Color::LightYellow => "#f5f543",
        Color::LightBlue => "#3b8eea",
        Color::LightMagenta => "#d670d6",
        Color::LightCyan => "#29b8db",
        Color::White => "#ffffff",
        _ => default,
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The buffer as an SVG document.
pub(crate) fn buffer_to_svg(buf: &Buffer) -> String {
    let (w, h) = (u32::from(buf.area.width), u32::from(buf.area.height));
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="DejaVu Sans Mono, monospace" font-size="15">"#,
        w * CELL_W,
        h * CELL_H
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="{BG}"/>"#);
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let cell = &buf[(x, y)];
            let mut fg = hex(cell.fg, FG);
            let mut bg = hex(cell.bg, BG);
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            let (px, py) = (u32::from(x) * CELL_W, u32::from(y) * CELL_H);
            if bg != BG {
                let _ = writeln!(
                    out,
                    r#"<rect x="{px}" y="{py}" width="{CELL_W}" height="{CELL_H}" fill="{bg}"/>"#
                );
            }
            let sym = cell.symbol();
            if sym.trim().is_empty() {
                continue;
            }
            // Block and box characters fill their cell exactly; glyphs from a
            // font would leave gaps between rows.
            if let Some(rect) = block_rect(sym) {
                let (rx, ry, rw, rh) = rect;
                let _ = writeln!(
                    out,
                    r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fg}"{}/>"#,
                    px as f32 + rx * CELL_W as f32,
                    py as f32 + ry * CELL_H as f32,
                    rw * CELL_W as f32,
                    rh * CELL_H as f32,
                    opacity(sym)
                );
                continue;
            }
            let mut attrs = String::new();
            if cell.modifier.contains(Modifier::BOLD) {
                attrs += r#" font-weight="bold""#;
            }
            if cell.modifier.contains(Modifier::DIM) {
                attrs += r#" opacity="0.6""#;
            }
            if cell.modifier.contains(Modifier::UNDERLINED) {
                attrs += r#" text-decoration="underline""#;
            }
            let _ = writeln!(
                out,
                r#"<text x="{px}" y="{}" fill="{fg}"{attrs}>{}</text>"#,
                py + CELL_H - 5,
                escape(sym)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The filled part of a block character as (x, y, w, h) fractions of the cell.
fn block_rect(sym: &str) -> Option<(f32, f32, f32, f32)> {
    let eighths = ["▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    if let Some(i) = eighths.iter().position(|&e| e == sym) {
        return Some((0.0, 0.0, (i as f32 + 1.0) / 8.0, 1.0));
    }
    match sym {
        "█" | "▓" | "▒" | "░" => Some((0.0, 0.0, 1.0, 1.0)),
        "▪" => Some((0.25, 0.35, 0.5, 0.3)),
        _ => None,
    }
}

/// Shade characters as translucent fills, as terminals draw their dot patterns.
fn opacity(sym: &str) -> &'static str {
    match sym {
        "▓" => r#" opacity="0.75""#,
        "▒" => r#" opacity="0.5""#,
        "░" => r#" opacity="0.4""#,
        _ => "",
    }
}

/// The buffer as plain text, one line per row, trailing blanks cut.
pub(crate) fn buffer_to_text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

/// Writes `buf`, a screen of tab `tab`, to `dir/ccl-bench-<tab>-N.svg` and
/// `.txt`, N the first number free for both; returns the two paths.
pub(crate) fn save(
    buf: &Buffer,
    tab: &str,
    dir: &Path,
) -> std::io::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let tab = tab.to_ascii_lowercase();
    let name = |n: u32, ext: &str| dir.join(format!("ccl-bench-{tab}-{n}.{ext}"));
    let n = (1..10_000)
        .find(|&n| !name(n, "svg").exists() && !name(n, "txt").exists())
        .ok_or_else(|| {
            std::io::Error::other(format!("{} holds 9,999 saved screens", dir.display()))
        })?;
    let (svg, txt) = (name(n, "svg"), name(n, "txt"));
    // Whole or not at all, and never over a file, even one made since the
    // check (see `atomic::write_new`).
    let write = |p: &Path, text: String| -> std::io::Result<()> {
        crate::atomic::write_new(p, text.as_bytes()).map_err(std::io::Error::other)
    };
    write(&svg, buffer_to_svg(buf))?;
    write(&txt, buffer_to_text(buf))?;
    Ok((svg, txt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn svg_of_a_small_buffer() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 4, 2));
        buf.set_string(0, 0, "a<", Style::new().fg(Color::Red));
        buf.set_string(2, 0, "█", Style::new().fg(Color::Blue));
        buf.set_string(0, 1, "x", Style::new().add_modifier(Modifier::REVERSED));
        let svg = buffer_to_svg(&buf);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains(r#"width="36" height="36""#));
        assert!(svg.contains(r##"<text x="0" y="13" fill="#cd3131">a</text>"##));
        assert!(svg.contains(">&lt;</text>"));
        assert!(svg.contains(r##"<rect x="18" y="0" width="9" height="18" fill="#2472c8"/>"##));
        // Reversed: default colours swapped, so a light cell with dark text.
        assert!(svg.contains(r##"<rect x="0" y="18" width="9" height="18" fill="#d4d4d4"/>"##));
        assert!(svg.contains(r##"fill="#1e1e1e">x</text>"##));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
