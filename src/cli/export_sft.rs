//! `vlm-eval export-sft`: flags, and the JSONL file written atomically (temporary file, then
//! rename), so a failed export never leaves a half-written dataset behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use super::error::CliError;

use crate::report::sft::{
    check_achievements, export_run_with, parse_min_progression, SftFilter, SftStats,
};
use crate::results::run::open_run;
use crate::results::summary::ReadError;

/// `vlm-eval export-sft` flags.
#[derive(Args, Debug)]
pub struct ExportSftArgs {
    /// Run folders to export (results/<run>).
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// Output JSONL file.
    #[arg(long)]
    pub out: PathBuf,
    /// Keep only rows whose user message carries an image.
    #[arg(long)]
    pub images_only: bool,
    /// Keep only episodes that unlocked this achievement (repeatable or comma-separated; all required).
    #[arg(long, value_delimiter = ',', value_name = "ACHIEVEMENT")]
    pub require_achievement: Vec<String>,
    /// Keep only episodes with at least this progression: a fraction (0.25) or a percent (25%).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub min_progression: Option<String>,
    /// Directory with crafter's textures, to replay frames a run did not save (`--frames`).
    #[arg(long)]
    pub assets: Option<PathBuf>,
}

fn read_err(e: ReadError) -> CliError {
    let code = if matches!(e, ReadError::Write { .. }) {
        1
    } else {
        2
    };
    CliError {
        code,
        message: e.to_string(),
    }
}

fn write_err(path: &Path, e: std::io::Error) -> ReadError {
    ReadError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Run `vlm-eval export-sft`.
pub fn cmd_export_sft(a: ExportSftArgs) -> Result<i32, CliError> {
    let require: Vec<String> = a
        .require_achievement
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    check_achievements(&require).map_err(CliError::usage)?;
    let min_progression = a
        .min_progression
        .as_deref()
        .map(parse_min_progression)
        .transpose()
        .map_err(CliError::usage)?;
    let filter = SftFilter {
        images_only: a.images_only,
        require,
        min_progression,
    };
    // Open every run first, so a bad one fails before anything is written.
    let runs = a
        .runs
        .iter()
        .map(|p| open_run(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_err)?;
    a.runs
        .iter()
        .for_each(|p| super::common::note_in_progress(p));
    if a.out.is_dir() {
        return Err(CliError::usage(format!(
            "--out {} is a folder; give a file name such as data.jsonl",
            a.out.display()
        )));
    }
    let dir = match a.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| read_err(write_err(&dir, e)))?;
    let name = a
        .out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data.jsonl".into());
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let mut stats = SftStats::default();
    let replayer = crate::eval::replay::RunReplayer::new(a.assets.clone());
    let mut warnings = Vec::new();
    let result = (|| -> Result<(), ReadError> {
        let file = File::create(&tmp).map_err(|e| write_err(&a.out, e))?;
        let mut w = BufWriter::new(file);
        for run in &runs {
            export_run_with(
                run,
                &filter,
                &mut stats,
                &mut warnings,
                Some(&replayer),
                |row| {
                    serde_json::to_writer(&mut w, &row)
                        .map_err(|e| write_err(&a.out, std::io::Error::other(e)))?;
                    w.write_all(b"\n").map_err(|e| write_err(&a.out, e))
                },
            )?;
        }
        let file = w
            .into_inner()
            .map_err(|e| write_err(&a.out, e.into_error()))?;
        file.sync_all().map_err(|e| write_err(&a.out, e))?;
        std::fs::rename(&tmp, &a.out).map_err(|e| write_err(&a.out, e))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(read_err(e));
    }
    for w in &warnings {
        tracing::warn!("{w}");
    }
    let s = &stats;
    println!(
        "wrote {} row(s) ({} with an image) from {} episode(s) of {} run(s) to {}",
        s.rows,
        s.image_rows,
        s.episodes,
        runs.len(),
        a.out.display()
    );
    println!(
        "skipped: {} failed turn(s), {} empty repl(ies), {} text-only turn(s) (--images-only), {} episode(s) filtered out, {} unfinished episode(s), {} episode(s) with an unreadable trajectory",
        s.error_turns,
        s.empty_turns,
        s.text_only_turns,
        s.episodes_filtered,
        s.episodes_unfinished,
        s.episodes_unreadable
    );
    if s.rows == 0 {
        tracing::warn!("no rows matched: check the filters");
    }
    Ok(0)
}
