//! A run's frames, wherever they come from: the PNG file when the run saved it, else the game
//! replayed from the trajectory's actions. Every reader (report GIFs and thumbnails,
//! `export-sft`, previews) goes through [`FrameReader::load`]. Replaying needs the agent's
//! protocol and the textures, which `results` may not import (it imports only `crafter`), so the
//! replay engine lives in `eval::replay` and reaches readers as a [`Replayer`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frames::frame_rel;
use super::run::episode_dir;

/// Renders the frames of a complete episode again from its recorded actions, checking each
/// against the run's hashes (`eval::replay` implements it).
pub trait Replayer: Send + Sync {
    /// Every frame's PNG bytes as the run saves them, indexed by env step; an error is one
    /// line naming the episode, the step and what differs (or why it cannot replay).
    fn replay(&self, run: &Path, seed: i64) -> Result<Vec<Vec<u8>>, String>;
}

/// Why a frame could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// No file, and no way to replay it.
    #[error("{path}: {why}")]
    Missing {
        /// The frame file's path.
        path: String,
        /// Why it is missing and what to do.
        why: String,
    },
    /// The file exists but could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The frame file's path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Replaying the episode failed (one line naming the episode and step).
    #[error("{0}")]
    Replay(String),
}

impl FrameError {
    /// What went wrong, without the path.
    pub fn reason(&self) -> String {
        match self {
            FrameError::Missing { why, .. } => why.clone(),
            FrameError::Io { source, .. } => source.to_string(),
            FrameError::Replay(m) => m.clone(),
        }
    }
}

/// Where a frame was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Its PNG file.
    File,
    /// Replayed from the trajectory.
    Replayed,
}

type Replayed = Result<Arc<Vec<Vec<u8>>>, String>;

/// Reads the frames of one run: the file when present, else a replay of the episode (done once
/// per episode and kept while that episode's frames are read).
pub struct FrameReader<'a> {
    run: PathBuf,
    replayer: Option<&'a dyn Replayer>,
    cached: Option<(i64, Replayed)>,
}

impl<'a> FrameReader<'a> {
    /// A reader of the run folder `run`; without a replayer a missing file is an error.
    pub fn new(run: &Path, replayer: Option<&'a dyn Replayer>) -> FrameReader<'a> {
        FrameReader {
            run: run.to_path_buf(),
            replayer,
            cached: None,
        }
    }

    /// The PNG bytes of one frame and where they came from.
    pub fn load(&mut self, seed: i64, step: u32) -> Result<(Vec<u8>, Origin), FrameError> {
        let path = episode_dir(&self.run, seed).join(frame_rel(step));
        match std::fs::read(&path) {
            Ok(bytes) => return Ok((bytes, Origin::File)),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(FrameError::Io {
                    path: path.display().to_string(),
                    source: e,
                })
            }
            Err(_) => {}
        }
        let Some(replayer) = self.replayer else {
            return Err(FrameError::Missing {
                path: path.display().to_string(),
                why: "no such file, and this reader cannot replay it (run `vlm-eval replay RUN` to write the frames)".into(),
            });
        };
        if self.cached.as_ref().map(|(s, _)| *s) != Some(seed) {
            self.cached = Some((seed, replayer.replay(&self.run, seed).map(Arc::new)));
        }
        let Some((_, replayed)) = &self.cached else {
            unreachable!("just filled")
        };
        let frames = replayed
            .as_ref()
            .map_err(|e| FrameError::Replay(e.clone()))?;
        match frames.get(step as usize) {
            Some(png) => Ok((png.clone(), Origin::Replayed)),
            None => Err(FrameError::Missing {
                path: path.display().to_string(),
                why: format!(
                    "no such file, and the episode has only {} frames",
                    frames.len()
                ),
            }),
        }
    }
}

/// One frame of a run: its file when present, else replayed (see [`FrameReader`]).
pub fn load(
    run: &Path,
    seed: i64,
    step: u32,
    replayer: Option<&dyn Replayer>,
) -> Result<Vec<u8>, FrameError> {
    FrameReader::new(run, replayer)
        .load(seed, step)
        .map(|(png, _)| png)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Replayer for Counting {
        fn replay(&self, _run: &Path, seed: i64) -> Result<Vec<Vec<u8>>, String> {
            self.0.fetch_add(1, Ordering::Relaxed);
            if seed == 9 {
                return Err("seed 9 step 3: frame sha256 differs".into());
            }
            Ok((0..4u8).map(|i| vec![i, seed as u8]).collect())
        }
    }

    #[test]
    fn files_first_then_one_replay_per_episode() {
        let d = std::env::temp_dir().join(format!("vlm-eval-frames-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let ep = episode_dir(&d, 2);
        std::fs::create_dir_all(ep.join("frames")).unwrap();
        std::fs::write(ep.join(frame_rel(1)), b"file").unwrap();
        let r = Counting(AtomicUsize::new(0));
        let mut reader = FrameReader::new(&d, Some(&r));
        assert_eq!(reader.load(2, 1).unwrap(), (b"file".to_vec(), Origin::File));
        assert_eq!(r.0.load(Ordering::Relaxed), 0);
        assert_eq!(reader.load(2, 0).unwrap(), (vec![0, 2], Origin::Replayed));
        assert_eq!(reader.load(2, 3).unwrap(), (vec![3, 2], Origin::Replayed));
        assert_eq!(r.0.load(Ordering::Relaxed), 1, "one replay per episode");
        let e = reader.load(2, 7).unwrap_err().to_string();
        assert!(
            e.contains("step_0007.png") && e.contains("only 4 frames"),
            "{e}"
        );
        let e = reader.load(9, 0).unwrap_err().to_string();
        assert_eq!(e, "seed 9 step 3: frame sha256 differs");
        let e = load(&d, 2, 0, None).unwrap_err().to_string();
        assert!(e.contains("vlm-eval replay"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
