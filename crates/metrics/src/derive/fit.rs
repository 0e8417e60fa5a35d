//! Least-squares line fits (the Hockney model t = α + β·bytes).

use std::collections::BTreeMap;

/// A fitted line y = alpha + beta·x.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    pub alpha: f64,
    pub beta: f64,
    /// Root mean square of the residuals, in y's unit.
    pub residual: f64,
    pub points: usize,
}

/// The least-squares line through `pts`; `None` with fewer than two
/// distinct x. (The fits hold [`Points`]; this is their reference.)
#[cfg(test)]
pub(crate) fn line(pts: &[(f64, f64)]) -> Option<Line> {
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

/// Points for a line fit, held per distinct x as their count, mean y and
/// sum of squared deviations from it (Welford's update): a fit over
/// millions of collectives of a few message sizes holds a few values, not
/// a point each. [`Points::line`] is [`line`] over the points added.
#[derive(Debug, Clone, Default)]
pub(crate) struct Points {
    /// By x's bits (their order is x's for the non-negative x of sizes).
    by_x: BTreeMap<u64, Moments>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Points {
    pub(crate) fn add(&mut self, x: f64, y: f64) {
        let m = self.by_x.entry(x.to_bits()).or_default();
        m.n += 1.0;
        let d = y - m.mean;
        m.mean += d / m.n;
        m.m2 += d * (y - m.mean);
    }

    /// How many points were added.
    pub(crate) fn len(&self) -> usize {
        self.by_x.values().map(|m| m.n as usize).sum()
    }

    /// How many distinct x they have.
    pub(crate) fn distinct(&self) -> usize {
        self.by_x.len()
    }

    /// The least-squares line through them; `None` with fewer than two
    /// distinct x. Over a group of points at one x, Σ(x − x̄)(y − ȳ) is
    /// n (x − x̄)(mean − ȳ), and the residuals' squares are the group's
    /// deviations from its mean plus n (mean − fit)².
    pub(crate) fn line(&self) -> Option<Line> {
        let groups: Vec<(f64, Moments)> = self
            .by_x
            .iter()
            .map(|(&x, &m)| (f64::from_bits(x), m))
            .collect();
        let n: f64 = groups.iter().map(|g| g.1.n).sum();
        let mx = groups.iter().map(|(x, m)| m.n * x).sum::<f64>() / n;
        let my = groups.iter().map(|(_, m)| m.n * m.mean).sum::<f64>() / n;
        let sxx: f64 = groups.iter().map(|(x, m)| m.n * (x - mx).powi(2)).sum();
        // Also refuses a NaN: sxx > 0 is false for it.
        if n < 2.0 || sxx.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let sxy: f64 = groups
            .iter()
            .map(|(x, m)| m.n * (x - mx) * (m.mean - my))
            .sum();
        let beta = sxy / sxx;
        let alpha = my - beta * mx;
        let sse: f64 = groups
            .iter()
            .map(|(x, m)| m.m2 + m.n * (m.mean - alpha - beta * x).powi(2))
            .sum();
        Some(Line {
            alpha,
            beta,
            residual: (sse / n).sqrt(),
            points: self.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The points of `exact_and_noisy_lines` and a cloud of repeated sizes
    /// fit as `line` fits them, to rounding.
    #[test]
    fn points_held_per_x_fit_as_the_points() {
        let fit = |pts: &[(f64, f64)]| {
            let mut p = Points::default();
            for &(x, y) in pts {
                p.add(x, y);
            }
            assert_eq!(p.len(), pts.len());
            p.line()
        };
        // y = 0, 2, 0 at x = 0, 1, 2: flat at 2/3, rms sqrt(8/9).
        let l = fit(&[(0.0, 0.0), (1.0, 2.0), (2.0, 0.0)]).unwrap();
        assert!(l.beta.abs() < 1e-12 && (l.alpha - 2.0 / 3.0).abs() < 1e-12);
        assert!((l.residual - (8.0f64 / 9.0).sqrt()).abs() < 1e-12);
        assert!(fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none(), "one distinct x");
        assert!(fit(&[]).is_none());
        // 3,000 points at four sizes, y = 5e-6 + x / 2e10 with a ±10 %
        // wobble: the same line as the points give.
        let pts: Vec<(f64, f64)> = (0..3000)
            .map(|i| {
                let x = [1024.0, 65536.0, 1048576.0, 16777216.0][i % 4];
                let wobble = 1.0 + 0.1 * ((i * 7919 % 21) as f64 - 10.0) / 10.0;
                (x, (5e-6 + x / 2e10) * wobble)
            })
            .collect();
        let (a, b) = (fit(&pts).unwrap(), line(&pts).unwrap());
        let close = |u: f64, v: f64| (u - v).abs() <= 1e-9 * v.abs().max(1e-30);
        assert!(
            close(a.alpha, b.alpha) && close(a.beta, b.beta),
            "{a:?} {b:?}"
        );
        assert!(
            close(a.residual, b.residual) && a.points == b.points,
            "{a:?} {b:?}"
        );
    }

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
