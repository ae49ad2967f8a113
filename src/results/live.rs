//! Reading run folders while they are written (`vlm-eval view`, `leaderboard`): finding the
//! runs under a folder, a change key from file times, and the tail of an episode's
//! `trajectory.jsonl` read incrementally and tolerantly (a torn last line is left for later,
//! a bad line is skipped and counted, never an error). Nothing here writes.

use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use super::run::{episode_dir, is_frame_rel};
use super::summary::ReadError;

/// Whether `dir` is a run folder (has a `run.json` file).
pub fn is_run_dir(dir: &Path) -> bool {
    dir.join("run.json").is_file()
}

/// The run folders a path names: the path itself when it is a run folder, else its direct
/// sub-folders that are run folders (symbolic links skipped), sorted by name. A missing path
/// or a path that is not a folder is an error naming it.
pub fn find_runs(dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let meta = std::fs::metadata(dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => super::run::missing(
            dir,
            "no such folder: pass a run folder or a folder of runs (results/)",
        ),
        _ => ReadError::Io {
            path: dir.display().to_string(),
            source,
        },
    })?;
    if !meta.is_dir() {
        return Err(ReadError::Corrupt {
            path: dir.display().to_string(),
            message: "not a folder: pass a run folder or a folder of runs (results/)".into(),
        });
    }
    if is_run_dir(dir) {
        return Ok(vec![dir.to_path_buf()]);
    }
    let entries = std::fs::read_dir(dir).map_err(|source| ReadError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        // Hidden folders are work in progress (a merge's `.<run>.merge-tmp`), never runs.
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| is_run_dir(p))
        .collect();
    out.sort();
    Ok(out)
}

/// The seeds of a run folder's episode folders: those with an `episode.json` (complete) and
/// those without (unfinished: interrupted or still playing), each sorted.
pub fn seed_folders(run: &Path) -> (Vec<i64>, Vec<i64>) {
    let (mut done, mut open) = (Vec::new(), Vec::new());
    if let Ok(entries) = std::fs::read_dir(run.join("episodes")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(seed) = name
                .to_str()
                .and_then(|n| n.strip_prefix("seed_"))
                .and_then(|s| s.parse::<i64>().ok())
            else {
                continue;
            };
            if entry.path().join("episode.json").is_file() {
                done.push(seed);
            } else {
                open.push(seed);
            }
        }
    }
    done.sort_unstable();
    open.sort_unstable();
    (done, open)
}

/// A key that changes when a run's results change: the modification times of `run.json`, the
/// `episodes` folder and each episode folder (an `episode.json` renamed into place changes
/// its folder's time). Trajectory appends do not change it.
pub fn change_key(run: &Path) -> Vec<(String, Option<SystemTime>)> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut key = vec![
        ("run.json".to_string(), mtime(&run.join("run.json"))),
        ("episodes".to_string(), mtime(&run.join("episodes"))),
    ];
    if let Ok(entries) = std::fs::read_dir(run.join("episodes")) {
        let mut seeds: Vec<(String, Option<SystemTime>)> = entries
            .flatten()
            .map(|e| {
                let t = e.metadata().and_then(|m| m.modified()).ok();
                (e.file_name().to_string_lossy().into_owned(), t)
            })
            .collect();
        seeds.sort();
        key.extend(seeds);
    }
    key
}

/// `run.json` as JSON, or `None` while it is missing or unreadable (never an error: a run
/// being started may not have written it yet).
pub fn read_run_info(run: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(run.join("run.json")).ok()?;
    serde_json::from_str::<Value>(&text)
        .ok()
        .filter(Value::is_object)
}

/// The path of a frame named by a trajectory (`frames/step_NNNN.png`) inside an episode
/// folder, or `None` when the name is not a plain frame file name.
pub fn frame_file(run: &Path, seed: i64, rel: &str) -> Option<PathBuf> {
    is_frame_rel(rel).then(|| episode_dir(run, seed).join(rel))
}

/// The state of one episode in flight, accumulated from its trajectory as it grows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrajectoryTail {
    /// Bytes of the file consumed so far (always at a line end).
    pub offset: u64,
    /// Trajectory lines read (turns played, failed calls included).
    pub lines: u32,
    /// Complete lines that were not JSON objects (skipped).
    pub skipped: u32,
    /// `turn` of the last line.
    pub turn: Option<u64>,
    /// Env step after the last line's actions.
    pub step: Option<u64>,
    /// Reply text of the last turn (cut to `TEXT_LIMIT` characters), or its error.
    pub last_reply: String,
    /// Actions the last turn executed.
    pub actions: Vec<String>,
    /// Sum of the rewards of every executed action so far.
    pub reward: f64,
    /// Achievements unlocked so far, sorted.
    pub achievements: BTreeSet<String>,
    /// The newest frame named by the trajectory (`frames/step_NNNN.png`).
    pub frame: Option<String>,
}

/// Most characters of a reply kept by [`TrajectoryTail`].
pub const TEXT_LIMIT: usize = 2000;
/// Most bytes read from a trajectory in one [`TrajectoryTail::update`] (a huge backlog is read
/// over several updates).
pub const READ_LIMIT: u64 = 16 * 1024 * 1024;

impl TrajectoryTail {
    /// Read the lines appended since the last call. A file that got shorter (the episode was
    /// restarted) is read again from the start. Returns whether anything new was read; a
    /// missing file reads as nothing new.
    pub fn update(&mut self, run: &Path, seed: i64) -> Result<bool, ReadError> {
        let path = episode_dir(run, seed).join("trajectory.jsonl");
        let io = |source| ReadError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        let len = file.metadata().map_err(io)?.len();
        if len < self.offset {
            *self = TrajectoryTail::default();
        }
        if len == self.offset {
            return Ok(false);
        }
        file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut buf = Vec::new();
        file.take(READ_LIMIT).read_to_end(&mut buf).map_err(io)?;
        let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
            return Ok(false);
        };
        for line in buf[..end].split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(line) {
                Ok(v) if v.is_object() => self.absorb(&v),
                _ => self.skipped += 1,
            }
        }
        self.offset += end as u64 + 1;
        Ok(true)
    }

    fn absorb(&mut self, v: &Value) {
        self.lines += 1;
        self.turn = v["turn"].as_u64().or(self.turn);
        self.step = v["step"].as_u64().or(self.step);
        if let Some(rel) = v["frame"]["path"].as_str() {
            self.frame = Some(rel.to_string());
        }
        self.actions.clear();
        for ex in v["executed"].as_array().into_iter().flatten() {
            if let Some(a) = ex["action"].as_str() {
                self.actions.push(a.to_string());
            }
            self.reward += ex["reward"].as_f64().unwrap_or(0.0);
            for u in ex["unlocked"].as_array().into_iter().flatten() {
                if let Some(u) = u.as_str() {
                    self.achievements.insert(u.to_string());
                }
            }
            if let Some(s) = ex["step"].as_u64() {
                self.step = Some(s);
            }
            if let Some(rel) = ex["frame"].as_str() {
                self.frame = Some(rel.to_string());
            }
        }
        let text = match (v["reply"]["text"].as_str(), v["error"].as_str()) {
            (_, Some(e)) => format!("error: {e}"),
            (Some(t), None) => t.to_string(),
            (None, None) => String::new(),
        };
        self.last_reply = text.chars().take(TEXT_LIMIT).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vlm-eval-live-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("episodes/seed_4")).unwrap();
        d
    }

    fn append(run: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(episode_dir(run, 4).join("trajectory.jsonl"))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn torn_lines_wait_bad_lines_are_skipped_and_restarts_reset() {
        let d = tmp("tail");
        let mut t = TrajectoryTail::default();
        assert!(!t.update(&d, 4).unwrap(), "no file yet: nothing");
        append(
            &d,
            r#"{"turn":0,"step":0,"frame":{"path":"frames/step_0000.png"},"reply":{"text":"go"},"executed":[{"action":"move_left","step":1,"reward":1.0,"unlocked":["collect_wood"],"frame":"frames/step_0001.png"}]}
{"turn":1,"st"#,
        );
        assert!(t.update(&d, 4).unwrap());
        assert_eq!((t.lines, t.turn, t.step), (1, Some(0), Some(1)));
        assert_eq!(t.frame.as_deref(), Some("frames/step_0001.png"));
        assert_eq!(t.achievements.len(), 1);
        // The torn half-line is not consumed; its completion is read next time.
        append(
            &d,
            "ep\":1,\"reply\":{\"text\":\"<b>\"},\"executed\":[{\"action\":\"do\",\"step\":2,\"reward\":0.5,\"unlocked\":[]}]}\nnot json\n",
        );
        assert!(t.update(&d, 4).unwrap());
        assert_eq!((t.lines, t.skipped, t.turn), (2, 1, Some(1)));
        assert_eq!(t.actions, ["do"]);
        assert_eq!(t.last_reply, "<b>");
        assert!((t.reward - 1.5).abs() < 1e-9);
        assert!(!t.update(&d, 4).unwrap());
        // The episode restarted: a shorter file is read from its start.
        std::fs::write(
            episode_dir(&d, 4).join("trajectory.jsonl"),
            "{\"turn\":0,\"error\":\"boom\"}\n",
        )
        .unwrap();
        assert!(t.update(&d, 4).unwrap());
        assert_eq!((t.lines, t.turn, t.reward), (1, Some(0), 0.0));
        assert_eq!(t.last_reply, "error: boom");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn runs_seeds_and_frames() {
        let d = tmp("find");
        assert!(find_runs(&d).unwrap().is_empty());
        std::fs::write(d.join("run.json"), "{}").unwrap();
        assert_eq!(find_runs(&d).unwrap(), std::slice::from_ref(&d));
        std::fs::create_dir_all(d.join("episodes/seed_2")).unwrap();
        std::fs::write(d.join("episodes/seed_2/episode.json"), "{}").unwrap();
        assert_eq!(seed_folders(&d), (vec![2], vec![4]));
        assert!(frame_file(&d, 4, "frames/../../run.json").is_none());
        assert!(frame_file(&d, 4, "frames/step_0001.png").is_some());
        assert!(find_runs(&d.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
