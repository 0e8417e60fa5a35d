//! The product tested from outside: the CLI as a process, agreement with real
//! traces from ../shared/corpus, and bad input.

mod architecture;
mod ask;
mod bad_corpus;
mod bad_input;
mod cli;
mod collectives;
mod corpus;
mod cross_rank;
mod docs;
mod export;
mod formats;
mod fuzz_smoke;
mod gate;
mod glance;
mod hang;
mod hostile;
mod mcp;
mod paged;
mod real_world;
mod summary;
mod support;
mod trust;
mod tui;
