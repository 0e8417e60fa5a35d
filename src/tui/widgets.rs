//! Small widgets shared by the tabs.

pub mod help;
pub mod lanes;
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

/// `s` cut to `width` columns in the middle (`void at::nat…ernel<4, 1>`):
/// kernel names share long prefixes and differ at the end, so a cut at the
/// end would make two kernels read the same.
pub fn fit_middle(s: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let w = |c: char| c.width().unwrap_or(1);
    let all = fit(s, usize::MAX);
    // Too narrow for both ends to say anything: the start.
    if all.chars().map(w).sum::<usize>() <= width || width < 24 {
        return fit(s, width);
    }
    let room = width - 1;
    let tail_w = room * 2 / 5;
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0;
    for c in all.chars().rev() {
        if used + w(c) > tail_w {
            break;
        }
        used += w(c);
        tail.push(c);
    }
    let head = fit(&all, room - used + 1);
    let head = head.trim_end_matches('…');
    format!("{head}…{}", tail.iter().rev().collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_in_the_middle_so_they_stay_apart() {
        let a =
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>";
        let b = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::Half>>";
        let (fa, fb) = (fit_middle(a, 40), fit_middle(b, 40));
        assert_ne!(fa, fb);
        assert_eq!(fa.chars().count(), 40, "{fa}");
        assert!(
            fa.starts_with("void at::native::") && fa.ends_with("add<float>>"),
            "{fa}"
        );
        assert_eq!(fit_middle("short", 40), "short");
    }

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
