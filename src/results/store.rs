//! The results store (DESIGN §4): run folders, per-episode folders with frames and a
//! trajectory, atomic writes, and the completeness rule (an episode is complete iff its
//! `episode.json` exists).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

/// A store error, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An I/O failure on a path.
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Serialisation failed.
    #[error("cannot serialise {path}: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Check that a user-given name can be one folder or file name inside another folder (a run
/// name under `--out`): not empty, no `/` or `\`, not `.` or `..`, no NUL. Returns the rule
/// broken.
pub fn check_path_component(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.contains(['/', '\\']) {
        "it contains a path separator"
    } else if name == "." || name == ".." {
        "it names a folder itself"
    } else if name.contains('\0') {
        "it contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(format!(
        "{why}; it must be one folder name: not empty, no '/' or '\\', not '.' or '..', no NUL"
    ))
}

/// Write a file atomically: a temporary file in the same folder, flushed, then renamed. On any
/// failure (a full disk, a file-size limit, a rename refused) the temporary file is removed, so
/// nothing but the old file (or no file) is left.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let written = (|| {
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(path))?;
        f.sync_all().map_err(io(path))?;
        drop(f);
        fs::rename(&tmp, path).map_err(io(path))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// Serialise to pretty JSON and write atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| StoreError::Json {
        path: path.display().to_string(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Makes a file's bytes on the writer thread (a frame's PNG encoding).
pub type Encode = Box<dyn FnOnce() -> Vec<u8> + Send>;

enum Job {
    Write(PathBuf, Arc<Vec<u8>>),
    Encode(PathBuf, Encode),
    Flush(tokio::sync::oneshot::Sender<Option<StoreError>>),
}

/// A background thread that encodes (when asked) and writes frame files in order, so episodes
/// never wait on the encoder or the filesystem while they could be talking to the model. Errors are kept and reported at the
/// next flush.
#[derive(Debug)]
struct FileSink {
    tx: std::sync::mpsc::Sender<Job>,
}

impl FileSink {
    fn start() -> FileSink {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::spawn(move || {
            let mut failed: Option<StoreError> = None;
            for job in rx {
                match job {
                    Job::Write(path, bytes) => {
                        if failed.is_none() {
                            if let Err(source) = fs::write(&path, bytes.as_slice()) {
                                failed = Some(StoreError::Io {
                                    path: path.display().to_string(),
                                    source,
                                });
                            }
                        }
                    }
                    Job::Encode(path, encode) => {
                        if failed.is_none() {
                            if let Err(source) = fs::write(&path, encode()) {
                                failed = Some(StoreError::Io {
                                    path: path.display().to_string(),
                                    source,
                                });
                            }
                        }
                    }
                    Job::Flush(done) => {
                        let _ = done.send(failed.take());
                    }
                }
            }
        });
        FileSink { tx }
    }
}

/// One run's folder.
#[derive(Clone, Debug)]
pub struct RunDir {
    /// The folder (`<out>/<run>`).
    pub root: PathBuf,
    sink: Arc<FileSink>,
}

impl RunDir {
    /// A run folder (created on first write).
    pub fn new(root: PathBuf) -> RunDir {
        RunDir {
            root,
            sink: Arc::new(FileSink::start()),
        }
    }

    /// `run.json`.
    pub fn run_json(&self) -> PathBuf {
        self.root.join("run.json")
    }

    /// The folder of one episode.
    pub fn episode_dir(&self, seed: i64) -> PathBuf {
        self.root.join("episodes").join(format!("seed_{seed}"))
    }

    /// `episode.json` of one episode.
    pub fn episode_json(&self, seed: i64) -> PathBuf {
        self.episode_dir(seed).join("episode.json")
    }

    /// The episode.json a finished try of this seed left, if it is there and readable.
    pub fn finished_episode(&self, seed: i64) -> Option<crate::results::formats::EpisodeResult> {
        let text = fs::read_to_string(self.episode_json(seed)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Whether an episode is complete.
    pub fn is_complete(&self, seed: i64) -> bool {
        self.episode_json(seed).is_file()
    }

    /// Start (or restart) an episode: remove any partial leftovers and create its folders.
    pub fn start_episode(&self, seed: i64) -> Result<EpisodeWriter, StoreError> {
        let dir = self.episode_dir(seed);
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        let frames = dir.join("frames");
        fs::create_dir_all(&frames).map_err(io(&frames))?;
        let path = dir.join("trajectory.jsonl");
        let trajectory = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok(EpisodeWriter {
            dir,
            trajectory,
            trajectory_path: path,
            sink: self.sink.clone(),
        })
    }
}

/// Writes one episode's files.
pub struct EpisodeWriter {
    dir: PathBuf,
    trajectory: File,
    trajectory_path: PathBuf,
    sink: Arc<FileSink>,
}

impl EpisodeWriter {
    /// Relative path (from the episode folder) of a frame.
    pub fn frame_rel(step: u32) -> String {
        format!("frames/step_{step:04}.png")
    }

    /// Save a frame's PNG bytes (written in the background; errors surface at `finish`).
    pub fn write_frame(&self, step: u32, png: Arc<Vec<u8>>) -> Result<(), StoreError> {
        let path = self.dir.join(Self::frame_rel(step));
        if let Err(std::sync::mpsc::SendError(Job::Write(path, bytes))) =
            self.sink.tx.send(Job::Write(path, png))
        {
            // The writer thread is gone (it never exits while senders live); write inline.
            fs::write(&path, bytes.as_slice()).map_err(io(&path))?;
        }
        Ok(())
    }

    /// Save a frame whose bytes `encode` makes, on the writer thread (so the episode does not
    /// wait for the encoding; errors surface at `finish`).
    pub fn write_frame_with(&self, step: u32, encode: Encode) -> Result<(), StoreError> {
        let path = self.dir.join(Self::frame_rel(step));
        if let Err(std::sync::mpsc::SendError(Job::Encode(path, encode))) =
            self.sink.tx.send(Job::Encode(path, encode))
        {
            fs::write(&path, encode()).map_err(io(&path))?;
        }
        Ok(())
    }

    /// Append one trajectory line (one `write` of the whole line, so a crash leaves whole lines).
    pub fn append(&mut self, record: &impl Serialize) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).map_err(|source| StoreError::Json {
            path: self.trajectory_path.display().to_string(),
            source,
        })?;
        line.push(b'\n');
        self.trajectory
            .write_all(&line)
            .map_err(io(&self.trajectory_path))
    }

    /// Finish: wait until every frame is on disk, then write `episode.json` atomically (the
    /// episode is complete from then on). The syncs run on the blocking pool, so episodes
    /// finishing together sync at once instead of one after another on the async workers.
    pub async fn finish(self, episode: &impl Serialize) -> Result<(), StoreError> {
        let path = self.dir.join("episode.json");
        let mut bytes = serde_json::to_vec_pretty(episode).map_err(|source| StoreError::Json {
            path: path.display().to_string(),
            source,
        })?;
        bytes.push(b'\n');
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.sink.tx.send(Job::Flush(done)).is_ok() {
            if let Ok(Some(e)) = wait.await {
                return Err(e);
            }
        }
        let (trajectory, trajectory_path) = (self.trajectory, self.trajectory_path);
        let sync = move || {
            trajectory.sync_data().map_err(io(&trajectory_path))?;
            write_atomic(&path, &bytes)
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => rt.spawn_blocking(sync).await.unwrap_or_else(|e| {
                Err(StoreError::Io {
                    path: self.dir.display().to_string(),
                    source: std::io::Error::other(e),
                })
            }),
            Err(_) => sync(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_atomic_write_leaves_no_temporary_file() {
        let d = std::env::temp_dir().join(format!("vlm-eval-atomic-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        // The rename fails: the target is a folder that is not empty.
        let target = d.join("run.json");
        fs::create_dir_all(target.join("x")).unwrap();
        let e = write_atomic(&target, b"{}").unwrap_err().to_string();
        assert!(e.contains("run.json"), "{e}");
        let left: Vec<String> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["run.json"], "a temporary file was left behind");
        // And a write that works leaves only the file.
        write_atomic(&d.join("a.json"), b"{}").unwrap();
        assert_eq!(fs::read(d.join("a.json")).unwrap(), b"{}");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 2);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn path_components() {
        for ok in ["run", "gpt-4o_tool", "a.b", "...", " x ", "ünï"] {
            assert!(check_path_component(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", ".", "..", "../../x", "a/b", "/abs", "a\\b", "x\0y", "run/",
        ] {
            let err = check_path_component(bad).unwrap_err();
            assert!(err.contains("one folder name"), "{bad}: {err}");
        }
    }
}
