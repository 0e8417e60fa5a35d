//! Small widgets shared by the tabs.

pub mod help;
pub mod lanes;
pub mod table;

/// A horizontal bar `width` cells wide filled to `fraction` (0..=1), with
/// eighth-block precision.
pub(crate) fn bar(fraction: f64, width: u16) -> String {
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

pub use crate::human::{fit, fit_middle};

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
