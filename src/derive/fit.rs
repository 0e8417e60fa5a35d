//! Least-squares line fits (the Hockney model t = α + β·bytes).

/// A fitted line y = alpha + beta·x.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub alpha: f64,
    pub beta: f64,
    /// Root mean square of the residuals, in y's unit.
    pub residual: f64,
    pub points: usize,
}

/// The least-squares line through `pts`; `None` with fewer than two distinct x.
pub fn line(pts: &[(f64, f64)]) -> Option<Line> {
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    // Also refuses a NaN: sxx > 0 is false for it.
    if pts.len() < 2 || sxx.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let beta = sxy / sxx;
    let alpha = my - beta * mx;
    let sse: f64 = pts.iter().map(|p| (p.1 - alpha - beta * p.0).powi(2)).sum();
    Some(Line {
        alpha,
        beta,
        residual: (sse / n).sqrt(),
        points: pts.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_noisy_lines() {
        let l = line(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert!((l.alpha - 1.0).abs() < 1e-12 && (l.beta - 2.0).abs() < 1e-12);
        assert!(l.residual < 1e-12);
        // y = 0, 2, 0 at x = 0, 1, 2: flat line at 2/3, residuals -2/3, 4/3, -2/3.
        let l = line(&[(0.0, 0.0), (1.0, 2.0), (2.0, 0.0)]).unwrap();
        assert!(l.beta.abs() < 1e-12);
        // rms = sqrt((4/9 + 16/9 + 4/9) / 3) = sqrt(8/9).
        assert!((l.residual - (8.0f64 / 9.0).sqrt()).abs() < 1e-12);
        assert!(line(&[(1.0, 1.0), (1.0, 2.0)]).is_none(), "one distinct x");
        assert!(line(&[]).is_none());
    }
}
