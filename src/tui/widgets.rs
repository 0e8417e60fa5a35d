//! Small widgets shared by the tabs.

pub mod help;
pub mod table;

/// A horizontal bar `width` cells wide filled to `fraction` (0..=1), with
/// eighth-block precision.
pub fn bar(fraction: f64, width: u16) -> String {
    const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    let f = if fraction.is_finite() {
        fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let eighths = (f * f64::from(width) * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    s += EIGHTHS[eighths % 8];
    s
}

/// `s` cut to `width` terminal columns (wide characters count two), with `…`
/// marking the cut; control characters, which would move the cursor, shown as `�`.
pub fn fit(s: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let clean = |c: char| if c.is_control() { '\u{fffd}' } else { c };
    let w = |c: char| clean(c).width().unwrap_or(0);
    if s.chars().map(w).sum::<usize>() <= width {
        return s.chars().map(clean).collect();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        if used + w(c) > width - 1 {
            break;
        }
        used += w(c);
        out.push(clean(c));
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_fitting() {
        assert_eq!(bar(0.5, 4), "██");
        assert_eq!(bar(0.5, 1), "▌");
        assert_eq!(bar(1.0 / 16.0, 1), "▏");
        assert_eq!(bar(2.0, 2), "██");
        assert_eq!(bar(f64::NAN, 3), "");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fit("abc", 0), "");
        // Wide characters take two columns; controls never reach the terminal.
        assert_eq!(fit("注意力_kernel", 6), "注意…");
        assert_eq!(fit("注意力_kernel", 7), "注意力…");
        assert_eq!(fit("a\nb", 4), "a\u{fffd}b");
    }
}
