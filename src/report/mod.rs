//! Everything that reads the run folder (through `results`): inference statistics,
//! comparisons, the regression gate, the HTML report and the SFT export.

pub mod baseline;
pub mod check;
pub mod compare;
pub mod crafter_score;
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
