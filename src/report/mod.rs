//! Everything that reads the run folder (through `results`): inference statistics,
//! comparisons, the regression gate, the HTML report and the SFT export.

pub mod baseline;
pub mod check;
pub mod compare;
/// The Crafter paper's score of stats.jsonl files (in the crafter crate, shared with the Python module).
pub use crate::crafter::score as crafter_score;
pub mod escape;
pub mod html;
mod html_episode;
pub mod leaderboard;
pub mod leaderboard_html;
pub mod leaderboard_runs;
pub mod overwrite;
pub mod protocol;
pub mod sft;
pub mod spend;
pub mod stats;
pub mod svg;
pub mod validate;
