//! BALROG's Crafter protocol (naive agent, commit af7d1f1), reproduced: its observation texts
//! (the `vlm-eval-observe` crate's `balrog` module, re-exported here), the texts read from a BALROG checkout at run time ([`texts`]), and the
//! messages its naive agent sends ([`history`]). The reply rule is in
//! [`crate::agent::parse`] (`ParserMode::Balrog`). BALROG's prose is never part of this
//! project: the instruction prompt, naive instruction and feedback sentence come from the
//! checkout the user names, checked against the pinned hashes.

pub mod history;
mod pysrc;
pub mod texts;

pub use history::{History, HistoryConfig};
pub use texts::{BalrogError, BalrogTexts, BALROG_REPO, PINNED_COMMIT};
pub use vlm_eval_observe::balrog::{balrog_observation, BalrogObs};
