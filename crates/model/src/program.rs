//! XLA program executions as steps. JAX and TensorFlow write no step
//! markers a profiler keeps, but a training loop runs one compiled program
//! per step (`jit_train_step`, PAX's `pjit__wrapped_step_fn`), and every
//! XLA profiler records each program run on the device (nsys-jax's
//! `XlaModule` ranges, XSpace's `XLA Modules` line). The program that runs
//! repeatedly and takes most of the device's program time is the step.

use std::collections::HashMap;

use super::strings::{Interner, StrId};
use super::time::Ns;
use super::timeline::{Annotation, Step};

/// The share of all top-level program time the step program must take: a
/// small helper run twice beside one long program is no step.
const MOST: f64 = 0.5;

/// The step program among device `annotations` (program executions, sorted
/// by start) and its iterations as steps (from one run's start to the
/// next's; the last to its end), numbered from 0; empty when no
/// program ran at least twice, or the one that did is not most of the time.
/// Only top-level executions count (a program run inside another's range is
/// part of that one).
pub(crate) fn program_steps(annotations: &[Annotation], names: &Interner) -> Vec<Step> {
    let mut top: Vec<&Annotation> = Vec::new();
    let mut reach = Ns::MIN;
    for a in annotations.iter().filter(|a| a.on_gpu && a.end > a.start) {
        if a.start >= reach {
            top.push(a);
            reach = a.end;
        } else {
            reach = reach.max(a.end);
        }
    }
    // XLA's autotuner runs candidate kernels as programs of their own
    // (`gemm_fusion_dot.411`, `extracted`) while compiling, for as long as
    // a few steps take: where the programs JAX compiled are named as JAX
    // names them, only those compete.
    let jax = |a: &&Annotation| {
        let n = names.get(a.name);
        ["jit_", "pjit_", "pmap_", "xmap_"]
            .iter()
            .any(|p| n.starts_with(p))
    };
    if top.iter().any(jax) {
        top.retain(jax);
    }
    let mut by_name: HashMap<StrId, (usize, i128)> = HashMap::new();
    let mut all: i128 = 0;
    for a in &top {
        let d = i128::from((a.end - a.start).get());
        let e = by_name.entry(a.name).or_default();
        e.0 += 1;
        e.1 += d;
        all += d;
    }
    let Some((&name, &(runs, time))) = by_name
        .iter()
        .filter(|(_, (runs, _))| *runs >= 2)
        .max_by_key(|(name, (runs, time))| (*time, *runs, std::cmp::Reverse(**name)))
    else {
        return Vec::new();
    };
    if runs < 2 || (time as f64) < MOST * all as f64 {
        return Vec::new();
    }
    // A step is an iteration of the loop: from one run to the next, so the
    // other programs and the host's gaps between runs count in it, as they
    // do in a ProfilerStep. The last run ends the last step.
    let runs: Vec<&&Annotation> = top.iter().filter(|a| a.name == name).collect();
    runs.iter()
        .enumerate()
        .map(|(k, a)| Step {
            number: k as i64,
            start: a.start,
            end: runs.get(k + 1).map_or(a.end, |next| next.start),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strings::Interner;

    fn runs(strings: &mut Interner, list: &[(&str, i64, i64)]) -> Vec<Annotation> {
        list.iter()
            .map(|&(name, start, end)| Annotation {
                name: strings.intern(name),
                start: Ns(start),
                end: Ns(end),
                on_gpu: true,
            })
            .collect()
    }

    #[test]
    fn the_repeated_program_with_most_time_is_the_step() {
        let mut s = Interner::default();
        // Three training steps of 100 ns, a 5 ns helper run twice, and an
        // inner program inside the first step (not top-level).
        let a = runs(
            &mut s,
            &[
                ("jit_train_step", 0, 100),
                ("jit_inner", 10, 20),
                ("jit_convert", 100, 105),
                ("jit_train_step", 110, 210),
                ("jit_convert", 210, 215),
                ("jit_train_step", 220, 320),
            ],
        );
        let steps = program_steps(&a, &s);
        let ranges: Vec<(i64, i64, i64)> = steps
            .iter()
            .map(|t| (t.number, t.start.get(), t.end.get()))
            .collect();
        // From run to run: the helper and the gaps count in the steps.
        assert_eq!(ranges, [(0, 0, 110), (1, 110, 220), (2, 220, 320)]);
        // One long program run once, a helper twice: no steps.
        let a = runs(
            &mut s,
            &[
                ("jit_f", 0, 1000),
                ("jit_psum", 1000, 1010),
                ("jit_psum", 1010, 1020),
            ],
        );
        assert!(program_steps(&a, &s).is_empty());
        // Nothing repeated: no steps.
        let a = runs(&mut s, &[("jit_f", 0, 10), ("jit_g", 10, 20)]);
        assert!(program_steps(&a, &s).is_empty());
        // XLA's autotuner running candidate kernels as programs while
        // compiling (rank 0 of a real PAX run: `gemm_fusion_dot.411` 18
        // times, 542 ms, beside 5 steps of 134 ms): only JAX's programs
        // compete, so the steps are still the step program's runs.
        let a = runs(
            &mut s,
            &[
                ("gemm_fusion_dot.411", 0, 300),
                ("gemm_fusion_dot.411", 300, 600),
                ("extracted", 600, 700),
                ("pjit__wrapped_step_fn", 1000, 1130),
                ("pjit__wrapped_step_fn", 1200, 1330),
                ("pjit__wrapped_step_fn", 1400, 1530),
            ],
        );
        let starts: Vec<i64> = program_steps(&a, &s)
            .iter()
            .map(|t| t.start.get())
            .collect();
        assert_eq!(starts, [1000, 1200, 1400]);
    }
}
