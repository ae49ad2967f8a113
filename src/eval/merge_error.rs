//! Why `vlm-eval merge` refused or failed (a leaf: the merge and the folder it writes share it).

use crate::results::store::StoreError;
use crate::results::summary::ReadError;
use crate::results::verify::Damage;

/// Why a merge was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// An input run could not be read (missing, partial or corrupt; the message names the file).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Two inputs were made with different settings.
    #[error("{b} does not match {a}: {fields}; merge only shards of one run (same flags apart from --shard/--seeds/--run-name/--out/--concurrency)")]
    Mismatch {
        /// The first input's run.json.
        a: String,
        /// The mismatching input's run.json.
        b: String,
        /// What differs.
        fields: String,
    },
    /// The same input folder was given twice (`what`: how, naming it once or by both spellings).
    #[error("{what}: pass each run folder once")]
    Twice {
        /// `X is given twice`, or `X and Y are the same folder`.
        what: String,
    },
    /// A finished episode of an input does not match its own record.
    #[error("damaged episode, nothing was merged: {0}")]
    Damaged(Damage),
    /// A seed is complete in two inputs.
    #[error("seed {seed} is complete in both {a} and {b}; each seed may come from one input only (do two shards overlap?)")]
    DuplicateSeed {
        /// The seed.
        seed: i64,
        /// Its episode.json in one input.
        a: String,
        /// Its episode.json in another.
        b: String,
    },
    /// Bad output folder.
    #[error("{0}")]
    Out(String),
    /// Writing the merged run failed.
    #[error(transparent)]
    Write(#[from] StoreError),
    /// An input (or --out) is still being written by a running `vlm-eval run`.
    #[error("{run} is still being written by `vlm-eval run` ({holder}): {fix}")]
    Running {
        /// The held folder.
        run: String,
        /// Who holds it (`results::lock::Holder`).
        holder: String,
        /// What to do.
        fix: &'static str,
    },
}

impl MergeError {
    /// Exit code: 1 for write failures, 2 for bad input.
    pub fn exit_code(&self) -> i32 {
        match self {
            MergeError::Write(_) => 1,
            MergeError::Read(ReadError::Write { .. }) => 1,
            _ => 2,
        }
    }
}
