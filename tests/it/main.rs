//! The integration tests: one test binary (`cargo test --test it`), one module per topic, so
//! that a change to the harness links one test binary instead of one per file (issue 50).
//! Run one topic with a filter on its module: `cargo test --release --test it docs_blocks::`.
//! A new test file goes in this folder with a `mod NAME;` line below (a file directly under
//! tests/ would be a test binary of its own, linked again on every change); it reaches the
//! shared modules as `use crate::support;` (or `crate::view_support`, …). All modules run in
//! one process: no test may set process-wide state (environment variables, the working
//! folder), and scratch folders come from `support::fresh_dir`/`scratch` (per calling file).
//! `support` (the binary, scratch folders) stays at `tests/support/` because the other harness
//! test binary, `tests/local_cli.rs` (the local model through the CLI, run with `--features
//! cuda` by the CUDA scripts), includes it too; the topical support modules
//! (`*_support`) are built on it.

#[path = "../support/mod.rs"]
mod support;

mod balrog_support;
mod docs_support;
mod lock_support;
mod report_support;
mod view_support;

mod balrog_parity;
mod balrog_request;
mod check_gate;
mod ci_baseline;
mod cli;
mod cli_docs;
mod cli_score;
mod compare_check;
mod cost;
mod docs_blocks;
mod endpoint_options;
mod endpoint_run;
mod frames;
mod frames_replay;
mod golden;
mod hostile_gate;
mod hostile_merge;
mod hostile_run;
mod hostile_serve;
mod leaderboard;
mod matrix;
mod no_clobber;
mod openai_http;
mod parser_modes;
mod presets;
mod prism;
mod prompt_cache;
mod protocol_guard;
mod providers;
mod real_servers;
mod report_html;
mod resilience;
mod run;
mod run_lock;
mod serve_env;
mod sft;
mod shard;
mod tables;
mod textures;
mod view;
mod view_browser;
