//! One writer per run folder: `run.lock` beside `run.json`, held for the life of a `run`
//! through an OS advisory lock (so a crash or `kill -9` releases it), recording who holds it.
//!
//! On Linux the lock is an open-file-description lock (`F_OFD_SETLK`): it belongs to the open
//! file, not to the process, so a second open in the same process conflicts with it (which is
//! how the lock is verified at start), and readers ask with `F_OFD_GETLK`, which never takes
//! the lock (a reader can therefore never make a starting writer be refused). On other Unix
//! systems classic POSIX record locks (`F_SETLK`/`F_GETLK`) are used and the in-process
//! verification is skipped (POSIX locks do not conflict within one process). Elsewhere there is
//! no lock and the run says so.
//!
//! The file is never deleted: deleting a lock file lets a waiting opener lock the old inode
//! while a newcomer locks a new one. A leftover file whose OS lock is free (a crashed run)
//! never blocks anything; its content only names who held it last.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name inside a run folder.
pub const LOCK_FILE: &str = "run.lock";

/// What `run.lock` records about the process holding the folder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Always `"vlm-eval run"`: marks the file as ours.
    pub lock: String,
    /// Process id of the holder.
    pub pid: u32,
    /// Host name of the machine it runs on.
    pub host: String,
    /// When it took the lock (RFC 3339, UTC, seconds).
    pub started_at: String,
    /// Version of the vlm-eval that wrote it.
    pub vlm_eval_version: String,
}

const MARK: &str = "vlm-eval run";

impl LockRecord {
    /// This process's record, now.
    pub fn current() -> LockRecord {
        LockRecord {
            lock: MARK.into(),
            pid: std::process::id(),
            host: host_name(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            vlm_eval_version: env!("CARGO_PKG_VERSION").into(),
        }
    }

    /// Read a record from the file's bytes: `None` unless it is one of ours.
    pub fn parse(bytes: &[u8]) -> Option<LockRecord> {
        serde_json::from_slice::<LockRecord>(bytes)
            .ok()
            .filter(|r| r.lock == MARK)
    }
}

/// Who holds a run folder, as its `run.lock` tells (the OS says that someone does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The record, when the file holds one of ours.
    pub record: Option<LockRecord>,
    /// The file's first bytes, printable, when it does not (empty: nothing written yet).
    pub content: String,
}

impl Holder {
    fn from_bytes(bytes: &[u8]) -> Holder {
        Holder {
            record: LockRecord::parse(bytes),
            content: snippet(bytes),
        }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.record {
            Some(r) => write!(
                f,
                "pid {} on host {}, started {}",
                r.pid, r.host, r.started_at
            ),
            None if self.content.is_empty() => {
                write!(f, "a process that has not written its pid to run.lock")
            }
            None => write!(
                f,
                "a process whose run.lock is not a vlm-eval lock record: {:?}",
                self.content
            ),
        }
    }
}

/// Why a run folder could not be held.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the folder.
    #[error("{dir} is in use by another `vlm-eval run` ({holder}): wait for it to finish, or pick another --run-name")]
    Held {
        /// The run folder.
        dir: String,
        /// Who holds it.
        holder: Box<Holder>,
    },
    /// `run.lock` is a link, a folder or another non-file.
    #[error("{path} is not a regular file (a link or a folder?): remove it, then rerun")]
    NotAFile {
        /// The lock file.
        path: String,
    },
    /// The folder or its lock file could not be created or read.
    #[error("cannot open {path}: {source}")]
    Io {
        /// The lock file (or the folder).
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl LockError {
    /// Exit code: 2 for a held folder or a bad lock file, 1 for I/O failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            LockError::Io { .. } => 1,
            _ => 2,
        }
    }
}

/// A held run folder: the lock lasts until this is dropped (or the process ends).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    /// The lock file.
    pub path: PathBuf,
    /// One line each: the lock could not be verified, or a foreign lock file was replaced.
    pub warnings: Vec<String>,
}

/// Hold `dir` for one writer: create the folder and `run.lock` if needed, take the OS lock
/// without waiting, check that a second open is refused, then write this process's record.
/// Another holder is `LockError::Held` and nothing in the folder is changed. Where the
/// filesystem's locks do not work the folder is still used, with a warning.
pub fn acquire(dir: &Path) -> Result<RunLock, LockError> {
    std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let path = dir.join(LOCK_FILE);
    let io = |source| LockError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut file = open(&path, true, true).map_err(|e| open_error(&path, e))?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(LockError::NotAFile {
            path: path.display().to_string(),
        });
    }
    let mut warnings = Vec::new();
    let untrusted = |why: String| {
        format!(
            "cannot rely on the run folder lock ({why}): nothing stops a second `vlm-eval run` on {} here; keep one writer per run folder yourself (docs/SCALING.md)",
            dir.display()
        )
    };
    match os::try_lock(&file).map_err(io)? {
        Try::Busy => {
            return Err(LockError::Held {
                dir: dir.display().to_string(),
                holder: Box::new(read_holder(&mut file).map_err(io)?),
            })
        }
        Try::Unsupported(e) => warnings.push(untrusted(format!("the filesystem refused it: {e}"))),
        Try::Taken => {
            if let Some(why) = verify(&path) {
                warnings.push(untrusted(why));
            }
        }
    }
    let old = read_all(&mut file).map_err(io)?;
    if !old.is_empty() && LockRecord::parse(&old).is_none() {
        warnings.push(format!(
            "{} held something other than a vlm-eval lock record ({:?}); it was replaced by this run's",
            path.display(),
            snippet(&old)
        ));
    }
    let mut bytes =
        serde_json::to_vec(&LockRecord::current()).map_err(|e| io(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    file.sync_data().map_err(io)?;
    Ok(RunLock {
        _file: file,
        path,
        warnings,
    })
}

/// Who holds `dir`, if a running process does; `None` when nobody does, the folder has no
/// `run.lock`, or locks cannot be queried there. Never takes the lock, so calling it can
/// never make a starting `run` be refused.
pub fn holder(dir: &Path) -> Option<Holder> {
    let path = dir.join(LOCK_FILE);
    let mut file = open(&path, false, false).ok()?;
    if !file.metadata().ok()?.is_file() || !os::is_locked(&file)? {
        return None;
    }
    Some(Holder::from_bytes(&read_all(&mut file).unwrap_or_default()))
}

/// Read who holds the lock. A holder that has just taken it may not have written its record
/// yet (two runs started at once): give it up to half a second before naming it unknown.
fn read_holder(file: &mut File) -> std::io::Result<Holder> {
    let mut holder = Holder::from_bytes(&read_all(file)?);
    for _ in 0..50 {
        if holder.record.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        holder = Holder::from_bytes(&read_all(file)?);
    }
    Ok(holder)
}

/// The second open must be refused while the first holds the lock; else the lock is not
/// enforced here. Returns why it cannot be trusted.
fn verify(path: &Path) -> Option<String> {
    if !os::PER_OPEN_FILE {
        return None;
    }
    let second = match open(path, true, false) {
        Ok(f) => f,
        Err(e) => return Some(format!("a second open of run.lock failed: {e}")),
    };
    match os::try_lock(&second) {
        Ok(Try::Busy) => None,
        Ok(Try::Taken) => Some("a second open of run.lock could take it too".into()),
        Ok(Try::Unsupported(e)) | Err(e) => Some(format!(
            "a second open of run.lock could not ask for it: {e}"
        )),
    }
}

/// Open the lock file (for writing: to take the lock; read-only: to ask about it).
fn open(path: &Path, write: bool, create: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(write).create(create);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Never follow a link: the lock file is written through this handle.
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    o.open(path)
}

fn open_error(path: &Path, e: std::io::Error) -> LockError {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::EISDIR) {
        return LockError::NotAFile {
            path: path.display().to_string(),
        };
    }
    LockError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

fn read_all(file: &mut File) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))?;
    file.take(64 * 1024).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The first 80 characters of a file's content, on one line.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut out: String = text
        .chars()
        .take(80)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most `len` bytes into the valid buffer we own.
        if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) } == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let name = String::from_utf8_lossy(&buf[..end]).into_owned();
            if !name.is_empty() {
                return name;
            }
        }
    }
    std::env::var("HOSTNAME")
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// The outcome of one attempt to take the lock.
enum Try {
    Taken,
    Busy,
    /// The filesystem does not do these locks (e.g. ENOLCK on NFS without a lock daemon).
    Unsupported(std::io::Error),
}

#[cfg(unix)]
mod os {
    use std::fs::File;
    use std::os::unix::io::AsRawFd;

    use super::Try;

    #[cfg(any(target_os = "linux", target_os = "android"))]
    const SETLK: libc::c_int = libc::F_OFD_SETLK;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const GETLK: libc::c_int = libc::F_OFD_GETLK;
    /// Whether locks belong to the open file (so two opens in one process conflict).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub const PER_OPEN_FILE: bool = true;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const SETLK: libc::c_int = libc::F_SETLK;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const GETLK: libc::c_int = libc::F_GETLK;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub const PER_OPEN_FILE: bool = false;

    /// A write lock over the whole file.
    fn whole_file() -> libc::flock {
        // SAFETY: `flock` is a plain C struct for which all-zero bytes are a valid value.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl
    }

    fn unsupported(e: &std::io::Error) -> bool {
        matches!(
            e.raw_os_error(),
            Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS)
        ) || e.raw_os_error() == Some(libc::ENOTSUP)
    }

    /// Take the lock without waiting.
    pub fn try_lock(file: &File) -> std::io::Result<Try> {
        let fl = whole_file();
        // SAFETY: fcntl with a lock command reads one `flock` through a valid pointer.
        if unsafe { libc::fcntl(file.as_raw_fd(), SETLK, &fl) } == 0 {
            return Ok(Try::Taken);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN | libc::EACCES) => Ok(Try::Busy),
            _ if unsupported(&e) => Ok(Try::Unsupported(e)),
            _ => Err(e),
        }
    }

    /// Whether another open file holds the lock (`None`: cannot tell here). Takes nothing.
    pub fn is_locked(file: &File) -> Option<bool> {
        let mut fl = whole_file();
        // SAFETY: fcntl with a get-lock command reads and writes one `flock` we own.
        if unsafe { libc::fcntl(file.as_raw_fd(), GETLK, &mut fl) } != 0 {
            return None;
        }
        Some(i64::from(fl.l_type) != i64::from(libc::F_UNLCK))
    }
}

#[cfg(not(unix))]
mod os {
    use std::fs::File;

    use super::Try;

    pub const PER_OPEN_FILE: bool = false;

    pub fn try_lock(_: &File) -> std::io::Result<Try> {
        Ok(Try::Unsupported(std::io::Error::other(
            "run folder locks are implemented for Unix only",
        )))
    }

    pub fn is_locked(_: &File) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vlm-eval-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_held_folder_is_refused_naming_the_holder_and_released_on_drop() {
        let d = tmp("held");
        let lock = acquire(&d).unwrap();
        assert!(lock.warnings.is_empty(), "{:?}", lock.warnings);
        let written = std::fs::read(d.join(LOCK_FILE)).unwrap();
        let record = LockRecord::parse(&written).unwrap();
        assert_eq!(record.pid, std::process::id());
        let h = holder(&d).expect("held");
        assert_eq!(h.record.as_ref(), Some(&record));
        let e = acquire(&d).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {}", record.pid))
                && msg.contains(&record.host)
                && msg.contains(&record.started_at)
                && msg.contains("--run-name"),
            "{msg}"
        );
        // The refused attempt changed nothing.
        assert_eq!(std::fs::read(d.join(LOCK_FILE)).unwrap(), written);
        drop(lock);
        assert_eq!(holder(&d), None);
        // The leftover file (as after a crash) does not block the next holder.
        let again = acquire(&d).unwrap();
        assert!(again.warnings.is_empty(), "{:?}", again.warnings);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn foreign_lock_files_are_reported() {
        let d = tmp("foreign");
        std::fs::create_dir_all(&d).unwrap();
        // Free, with garbage: taken, reported, replaced.
        std::fs::write(d.join(LOCK_FILE), "locked by backup job 7\n").unwrap();
        let lock = acquire(&d).unwrap();
        assert_eq!(lock.warnings.len(), 1, "{:?}", lock.warnings);
        assert!(
            lock.warnings[0].contains("locked by backup job 7")
                && lock.warnings[0].contains("replaced"),
            "{:?}",
            lock.warnings
        );
        // Held, with garbage: refused, naming the content.
        std::fs::write(d.join(LOCK_FILE), "someone else's\x01lock").unwrap();
        let msg = acquire(&d).unwrap_err().to_string();
        assert!(
            msg.contains("not a vlm-eval lock record") && msg.contains("someone else's lock"),
            "{msg}"
        );
        drop(lock);
        // A link is never followed.
        #[cfg(unix)]
        {
            let l = tmp("link");
            std::fs::create_dir_all(&l).unwrap();
            std::os::unix::fs::symlink(d.join(LOCK_FILE), l.join(LOCK_FILE)).unwrap();
            let e = acquire(&l).unwrap_err();
            assert!(matches!(e, LockError::NotAFile { .. }), "{e}");
            assert_eq!(holder(&l), None);
            let _ = std::fs::remove_dir_all(&l);
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn no_lock_file_means_no_holder() {
        let d = tmp("none");
        assert_eq!(holder(&d), None);
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(holder(&d), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn holder_lines() {
        let h = Holder::from_bytes(b"");
        assert!(h.to_string().contains("not written its pid"));
        let h = Holder::from_bytes(br#"{"pid": 3}"#);
        assert!(h.to_string().contains("not a vlm-eval lock record"), "{h}");
        let r = LockRecord::current();
        let h = Holder::from_bytes(&serde_json::to_vec(&r).unwrap());
        assert_eq!(
            h.to_string(),
            format!("pid {} on host {}, started {}", r.pid, r.host, r.started_at)
        );
    }
}
