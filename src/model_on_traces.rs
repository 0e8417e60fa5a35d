//! Tests of the model (`ccl-model`) and of the synthetic runs (`ccl-read`'s
//! `synth`) on traces read by the real readers and measured by the metrics:
//! they need crates that the crate under test cannot see.

mod clock;
mod collectives;
mod exec_trace;
mod synth;
