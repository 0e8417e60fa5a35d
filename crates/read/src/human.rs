//! Numbers and names for people: counts with thousands separators, byte
//! sizes in the unit that keeps them readable, names cut to a width of
//! terminal columns. Times are `model::time::human`.

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Decimal byte sizes with three significant digits: `757 kB`, `1.80 MB`, `2.15 GB`.
pub fn bytes(n: u64) -> String {
    let v = n as f64;
    let (v, unit) = match n {
        0..1_000 => return format!("{n} B"),
        1_000..1_000_000 => (v / 1e3, "kB"),
        1_000_000..1_000_000_000 => (v / 1e6, "MB"),
        1_000_000_000..1_000_000_000_000 => (v / 1e9, "GB"),
        _ => (v / 1e12, "TB"),
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// `1 file`, `4 files`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{} {}", count(n as u64), if n == 1 { one } else { many })
}

/// Sorted rank numbers as people write them: `0-7` when contiguous, else a
/// comma list, its first four and the count when longer than 8.
pub fn ranks(ranks: &[u32]) -> String {
    let list = |rs: &[u32]| rs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    match ranks {
        [first, .., last] if (*last - *first) as usize + 1 == ranks.len() => {
            format!("{first}-{last}")
        }
        _ if ranks.len() > 8 => format!("{}, ... ({} in all)", list(&ranks[..4]), ranks.len()),
        _ => list(ranks),
    }
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
    fn rank_lists_as_people_write_them() {
        assert_eq!(ranks(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranks(&[0, 2]), "0, 2");
        assert_eq!(
            ranks(&(0..20).step_by(2).collect::<Vec<_>>()),
            "0, 2, 4, 6, ... (10 in all)"
        );
    }

    #[test]
    fn counts_and_sizes_read_as_people_write_them() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(455_123), "455,123");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(bytes(757_000), "757 kB");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_800_000), "1.80 MB");
        assert_eq!(bytes(2_150_000_000), "2.15 GB");
        assert_eq!(plural(1, "file", "files"), "1 file");
        assert_eq!(plural(4, "file", "files"), "4 files");
    }
}
