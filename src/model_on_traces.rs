//! Tests of the model (`ccl-model`) on traces written by `synth` and read by
//! the real readers: they need both, which the model crate cannot see.

mod clock;
mod collectives;
