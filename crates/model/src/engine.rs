//! Inference engine steps: vLLM `execute_context_N(..)_generation_M(..)` and
//! SGLang `step[PREFILL|EXTEND|DECODE …]` ranges. A serving trace has no
//! `ProfilerStep`; its engine steps are its steps.

use std::sync::OnceLock;

use regex::Regex;

use super::strings::Interner;
use super::time::Ns;
use super::timeline::{Annotation, RankTimeline, Step};

/// An inference engine step: vLLM `execute_context_N(..)_generation_M(..)`
/// (prefill when N > 0) or SGLang `step[PREFILL|EXTEND|DECODE …]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStep {
    pub start: Ns,
    pub dur: Ns,
    pub prefill: bool,
}

pub(crate) fn engine_step(name: &str) -> Option<bool> {
    static VLLM: OnceLock<Regex> = OnceLock::new();
    static SGLANG: OnceLock<Regex> = OnceLock::new();
    let vllm = VLLM.get_or_init(|| {
        Regex::new(r"^execute_(?:\d+_)?context_(\d+)\(.*\)_generation_(\d+)").expect("valid")
    });
    let sglang =
        SGLANG.get_or_init(|| Regex::new(r"^step\[(PREFILL|EXTEND|MIXED|DECODE)").expect("valid"));
    if let Some(c) = vllm.captures(name) {
        return Some(c[1] != *"0");
    }
    sglang.captures(name).map(|c| &c[1] != "DECODE")
}

pub fn engine_steps(t: &RankTimeline) -> Vec<EngineStep> {
    from_annotations(&t.annotations, &t.strings)
}

/// The engine steps among CPU annotations, outermost of nested ones, by start.
pub(crate) fn from_annotations(annotations: &[Annotation], strings: &Interner) -> Vec<EngineStep> {
    let mut v: Vec<EngineStep> = annotations
        .iter()
        .filter(|a| !a.on_gpu)
        .filter_map(|a| {
            Some(EngineStep {
                start: a.start,
                dur: a.end - a.start,
                prefill: engine_step(strings.get(a.name))?,
            })
        })
        .collect();
    // SGLang wraps its `step[…]` inside vLLM-style `execute_…` ranges: keep the
    // outer range of nested ones so a step counts once.
    v.sort_by_key(|s| (s.start, std::cmp::Reverse(s.dur)));
    let mut out: Vec<EngineStep> = Vec::with_capacity(v.len());
    for s in v {
        match out.last() {
            Some(last) if s.start + s.dur <= last.start + last.dur => {}
            _ => out.push(s),
        }
    }
    out
}

/// The engine steps as the rank's steps, numbered 0, 1, … by start, for a
/// trace without `ProfilerStep` annotations.
pub(crate) fn as_steps(annotations: &[Annotation], strings: &Interner) -> Vec<Step> {
    from_annotations(annotations, strings)
        .iter()
        .zip(0..)
        .map(|(s, number)| Step {
            number,
            start: s.start,
            end: s.start + s.dur,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_step_names() {
        assert_eq!(
            engine_step("execute_context_1(888_788544)_generation_0(0)"),
            Some(true)
        );
        assert_eq!(
            engine_step("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(x)"),
            Some(false)
        );
        assert_eq!(engine_step("step[DECODE bs=32]"), Some(false));
        assert_eq!(engine_step("step[PREFILL bs=4]"), Some(true));
        assert_eq!(engine_step("forward"), None);
    }

    #[test]
    fn engine_steps_become_steps() {
        let mut strings = Interner::default();
        let mut range = |name: &str, start: Ns, end: Ns, on_gpu| Annotation {
            name: strings.intern(name),
            start,
            end,
            on_gpu,
        };
        let anns = vec![
            range(
                "execute_context_1(888_788544)_generation_0(0)",
                Ns(100),
                Ns(200),
                false,
            ),
            // The GPU copy of the range and a nested SGLang step count once.
            range(
                "execute_context_1(888_788544)_generation_0(0)",
                Ns(110),
                Ns(190),
                true,
            ),
            range("step[DECODE bs=32]", Ns(210), Ns(240), false),
            range(
                "execute_context_0(0)_generation_8(8)",
                Ns(205),
                Ns(250),
                false,
            ),
            range("forward", Ns::ZERO, Ns(300), false),
        ];
        let steps = as_steps(&anns, &strings);
        assert_eq!(
            steps,
            vec![
                Step {
                    number: 0,
                    start: Ns(100),
                    end: Ns(200)
                },
                Step {
                    number: 1,
                    start: Ns(205),
                    end: Ns(250)
                },
            ]
        );
    }
}
