//! `vlm-eval assets fetch`: crafter 1.8.3's sdist downloaded with pip, every texture
//! verified against the sha256 table, and published atomically into the cache.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use super::machine::{cache_dir, python_interpreter};

use super::{
    official_files, official_sha256, sha256_hex, TextureError, TextureSet, CACHE_SUBDIR,
    CRAFTER_VERSION,
};

/// `vlm-eval assets fetch`: download crafter 1.8.3 with pip, verify every texture's sha256 and
/// write them atomically to `dest` (default `<cache_dir>/crafter-1.8.3-assets`); returns the
/// folder.
pub fn fetch_official(dest: Option<&Path>) -> Result<PathBuf, TextureError> {
    let dest = match dest {
        Some(d) => d.to_path_buf(),
        None => cache_dir()?.join(CACHE_SUBDIR),
    };
    if verify_all_files(&dest) {
        tracing::info!(dir = %dest.display(), "crafter {CRAFTER_VERSION}'s textures are already there");
        return Ok(dest);
    }
    check_replaceable(&dest)?;

    let python = python_interpreter();
    let work = TempDir::new(&std::env::temp_dir(), "vlm-eval-fetch")?;
    let download = work.path().join("download");
    let archive = pip_download(&python, &download)?;
    tracing::info!(archive = %archive.display(), "downloaded crafter {CRAFTER_VERSION}");

    let files = read_archive_assets(&python, &archive, work.path())?;
    verify_fetched(&archive, &files)?;

    install_files(&files, &dest)?;
    tracing::info!(dir = %dest.display(), "installed crafter {CRAFTER_VERSION}'s textures");
    Ok(dest)
}

/// Copy crafter's verified textures from `src` (an installed package's `assets` folder) into
/// `dest` through the same staging, check and atomic publish as a download.
pub(super) fn install_from_dir(src: &Path, dest: &Path) -> Result<(), TextureError> {
    if verify_all_files(dest) {
        return Ok(());
    }
    check_replaceable(dest)?;
    let mut files = BTreeMap::new();
    for (file, _) in official_files() {
        let path = src.join(file);
        let bytes = std::fs::read(&path).map_err(|err| TextureError::Unreadable {
            file: file.to_string(),
            dir: src.to_path_buf(),
            err,
        })?;
        files.insert(file.to_string(), bytes);
    }
    verify_fetched(src, &files)?;
    install_files(&files, dest)
}

/// Write verified `files` into a staging folder beside `dest`, prove it loads, publish it.
fn install_files(files: &BTreeMap<String, Vec<u8>>, dest: &Path) -> Result<(), TextureError> {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|err| TextureError::Write {
        path: parent.clone(),
        err,
    })?;
    let leaf = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| CACHE_SUBDIR.to_string());
    let staging = TempDir::new(&parent, &format!(".{leaf}.partial"))?;
    for (file, bytes) in files {
        let path = staging.path().join(file);
        std::fs::write(&path, bytes).map_err(|err| TextureError::Write { path, err })?;
    }
    // Prove the written folder loads before publishing it.
    TextureSet::load_official(staging.path())?;
    publish(staging, dest)
}

// ---------------------------------------------------------------------------------------------
// Staging folders, checks and downloads.

/// A uniquely named directory removed (best effort) on drop.
pub(super) struct TempDir {
    path: Option<PathBuf>,
}

impl TempDir {
    /// Create `<parent>/<prefix>-<pid>-<nanos>`.
    pub(super) fn new(parent: &Path, prefix: &str) -> Result<TempDir, TextureError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = parent.join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|err| TextureError::Write {
            path: path.clone(),
            err,
        })?;
        Ok(TempDir { path: Some(path) })
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        self.path
            .as_deref()
            .expect("temp dir is present until released")
    }

    /// Stop managing the directory (it was renamed away) and return its path.
    pub(super) fn release(mut self) -> PathBuf {
        self.path
            .take()
            .expect("temp dir is present until released")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// True if `dir` holds all 56 files of crafter 1.8.3's assets folder with the right hashes.
pub(super) fn verify_all_files(dir: &Path) -> bool {
    official_files().all(|(file, sha)| {
        std::fs::read(dir.join(file)).is_ok_and(|bytes| sha256_hex(&bytes) == sha)
    })
}

/// Error unless `dest` is absent, empty, or holds only files named like crafter's assets.
pub(super) fn check_replaceable(dest: &Path) -> Result<(), TextureError> {
    if !dest.exists() {
        return Ok(());
    }
    let not_ours = |entry: String| TextureError::DestNotEmpty {
        dir: dest.to_path_buf(),
        entry,
    };
    if !dest.is_dir() {
        return Err(not_ours("(it is a file)".to_string()));
    }
    let entries = std::fs::read_dir(dest).map_err(|err| TextureError::Write {
        path: dest.to_path_buf(),
        err,
    })?;
    for entry in entries {
        let entry = entry.map_err(|err| TextureError::Write {
            path: dest.to_path_buf(),
            err,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || official_sha256(&name).is_none() {
            return Err(not_ours(name));
        }
    }
    Ok(())
}

/// Run pip to download crafter's sdist (or, failing that, any distribution) into `dir`;
/// returns the archive's path.
pub(super) fn pip_download(python: &OsString, dir: &Path) -> Result<PathBuf, TextureError> {
    let python_name = python.to_string_lossy().into_owned();
    let requirement = format!("crafter=={CRAFTER_VERSION}");
    let mut detail = String::new();
    for no_binary in [true, false] {
        let mut cmd = Command::new(python);
        cmd.args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ]);
        if no_binary {
            cmd.args(["--no-binary", ":all:"]);
        }
        cmd.arg(&requirement).arg("-d").arg(dir);
        tracing::info!(?cmd, "downloading crafter {CRAFTER_VERSION} with pip");
        let output = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|err| TextureError::Python {
                python: python_name.clone(),
                err,
            })?;
        if output.status.success() {
            if let Some(archive) = find_archive(dir) {
                return Ok(archive);
            }
            detail = format!(
                "pip succeeded but left no crafter archive in {}",
                dir.display()
            );
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            detail = stderr
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("pip exited with an error and no message")
                .to_string();
            tracing::debug!(%detail, no_binary, "pip download failed");
        }
    }
    Err(TextureError::Download {
        python: python_name,
        detail,
    })
}

/// The crafter archive (`.tar.gz`, `.zip` or `.whl`) pip left in `dir`.
pub(super) fn find_archive(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            name.starts_with("crafter")
                && (name.ends_with(".tar.gz") || name.ends_with(".whl") || name.ends_with(".zip"))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// True if `path` (inside an archive or extraction) is `…/crafter/assets/<file>.png`; returns
/// the file name.
pub(super) fn asset_file_name(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let parent = path.parent()?;
    let grandparent = parent.parent()?;
    let is_asset = file.ends_with(".png")
        && parent.file_name()? == "assets"
        && grandparent.file_name()? == "crafter";
    is_asset.then(|| file.to_string())
}

/// All `crafter/assets/*.png` files in the archive, by file name.
pub(super) fn read_archive_assets(
    python: &OsString,
    archive: &Path,
    work: &Path,
) -> Result<BTreeMap<String, Vec<u8>>, TextureError> {
    let bad = |reason: String| TextureError::Archive {
        archive: archive.to_path_buf(),
        reason,
    };
    let name = archive.to_string_lossy().to_lowercase();
    let mut files = BTreeMap::new();
    if name.ends_with(".tar.gz") {
        let file = std::fs::File::open(archive).map_err(|e| bad(e.to_string()))?;
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let path = entry.path().map_err(|e| bad(e.to_string()))?.into_owned();
            if !entry.header().entry_type().is_file() {
                continue;
            }
            if let Some(file) = asset_file_name(&path) {
                let mut bytes = Vec::new();
                entry
                    .read_to_end(&mut bytes)
                    .map_err(|e| bad(format!("{}: {e}", path.display())))?;
                files.insert(file, bytes);
            }
        }
    } else {
        // Wheels and zip sdists: let Python's zipfile (which sanitises member paths) extract it.
        let out = work.join("unzipped");
        let status = Command::new(python)
            .args(["-m", "zipfile", "-e"])
            .arg(archive)
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|err| TextureError::Python {
                python: python.to_string_lossy().into_owned(),
                err,
            })?;
        if !status.success() {
            return Err(bad(format!("`python -m zipfile -e` failed ({status})")));
        }
        collect_assets(&out, &mut files, 0).map_err(|e| bad(e.to_string()))?;
    }
    if files.is_empty() {
        return Err(bad("it contains no crafter/assets/*.png files".to_string()));
    }
    Ok(files)
}

/// Walk `dir` (a few levels deep) collecting `…/crafter/assets/*.png` files.
pub(super) fn collect_assets(
    dir: &Path,
    files: &mut BTreeMap<String, Vec<u8>>,
    depth: usize,
) -> std::io::Result<()> {
    if depth > 4 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_assets(&path, files, depth + 1)?;
        } else if kind.is_file() {
            if let Some(file) = asset_file_name(&path) {
                files.insert(file, std::fs::read(&path)?);
            }
        }
    }
    Ok(())
}

/// Check the extracted files are exactly crafter 1.8.3's assets, byte for byte.
pub(super) fn verify_fetched(
    archive: &Path,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<(), TextureError> {
    for (file, bytes) in files {
        let Some(expected) = official_sha256(file) else {
            return Err(TextureError::Archive {
                archive: archive.to_path_buf(),
                reason: format!(
                    "it has crafter/assets/{file}, which crafter {CRAFTER_VERSION} does not"
                ),
            });
        };
        let actual = sha256_hex(bytes);
        if actual != expected {
            return Err(TextureError::FetchChecksum {
                file: file.clone(),
                actual,
                expected: expected.to_string(),
            });
        }
    }
    if let Some((missing, _)) = official_files().find(|(f, _)| !files.contains_key(*f)) {
        return Err(TextureError::Archive {
            archive: archive.to_path_buf(),
            reason: format!("it lacks crafter/assets/{missing}"),
        });
    }
    Ok(())
}

/// Atomically move the finished `staging` folder to `dest`, replacing an old textures folder.
pub(super) fn publish(staging: TempDir, dest: &Path) -> Result<(), TextureError> {
    let write_err = |path: &Path, err| TextureError::Write {
        path: path.to_path_buf(),
        err,
    };
    let old = if dest.exists() {
        let parent = dest.parent().unwrap_or_else(|| Path::new("."));
        let aside = parent.join(format!(
            ".{}.old-{}",
            dest.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::rename(dest, &aside).map_err(|err| write_err(dest, err))?;
        Some(aside)
    } else {
        None
    };
    if let Err(err) = std::fs::rename(staging.path(), dest) {
        if let Some(aside) = &old {
            let _ = std::fs::rename(aside, dest);
        }
        return Err(write_err(dest, err));
    }
    staging.release();
    if let Some(aside) = old {
        let _ = std::fs::remove_dir_all(aside);
    }
    Ok(())
}
