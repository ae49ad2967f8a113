//! The model matrix: `run --model a,b,c`, or `[[models]]` entries in `--config` (each with its
//! own endpoint, key variable, prices and headers). Every model plays the same seeds and
//! settings into its own ordinary run folder; the models' runners play at once, each with its
//! own episode concurrency and its own adaptive per-endpoint limit, so a slow or failing model
//! holds only its own slots. The end prints the comparison `vlm-eval compare` prints and
//! writes its CSV to `<out>/matrix_<models>_<settings>.csv` (named by its models, so that
//! another matrix never overwrites it).

use std::collections::HashSet;
use std::path::PathBuf;

use indicatif::MultiProgress;

use super::args::{split_models, ModelEntry, RunArgs};
use super::record::run_record;
use super::resolve::{folder_safe, resolve_run, settings_name};
use super::start::{exit_code, plan_run, start_run};
use crate::cli::common::{print_comparison, runtime, sibling, write_comparison};
use crate::cli::error::CliError;
use crate::eval::runner::Display;
use crate::report::compare::{parse_columns, GroupBy};
use crate::results::run::open_run;

/// The models of a matrix run, or `None` for an ordinary one-model run (a `--model` without a
/// comma and no `[[models]]`). Duplicate names are an error.
pub(super) fn model_list(a: &RunArgs) -> Result<Option<Vec<ModelEntry>>, CliError> {
    let entries = if !a.models.is_empty() {
        match &a.model {
            // `--model` picks some of the file's entries (checked in `check_entries`).
            Some(flag) => split_models(flag)?
                .into_iter()
                .filter_map(|name| a.models.iter().find(|e| e.model == name).cloned())
                .collect(),
            None => a.models.clone(),
        }
    } else {
        match &a.model {
            Some(list) if list.contains(',') => split_models(list)?
                .into_iter()
                .map(|model| ModelEntry {
                    model,
                    ..ModelEntry::default()
                })
                .collect(),
            _ => return Ok(None),
        }
    };
    let mut seen = HashSet::new();
    for e in &entries {
        if e.model.trim().is_empty() {
            return Err(CliError::usage(
                "a [[models]] entry has an empty model name: give each entry model = \"NAME\"",
            ));
        }
        if !seen.insert(e.model.as_str()) {
            return Err(CliError::usage(format!(
                "model {:?} is listed twice: list each model once",
                e.model
            )));
        }
    }
    if a.run_name.is_some() && entries.len() > 1 {
        return Err(CliError::usage(format!(
            "--run-name names one run folder, but {} models are listed: leave it out (each model gets its default name) or give each [[models]] entry its own run-name",
            entries.len()
        )));
    }
    Ok(Some(entries))
}

/// The matrix's CSV name: `matrix_<model>+<model>+…_<settings>.csv`, so that a matrix of
/// other models never overwrites it; when the models' names would make the file name too long
/// for a filesystem, `matrix_<N>models-<digest>_<settings>.csv` (the sha256 of the names).
fn matrix_csv_name(entries: &[ModelEntry], settings: &str) -> String {
    let names: Vec<&str> = entries.iter().map(|e| e.model.as_str()).collect();
    let joined: Vec<String> = names.iter().map(|n| folder_safe(n)).collect();
    let name = format!("matrix_{}_{settings}.csv", joined.join("+"));
    // 255 bytes is the common limit; `.spend.csv` is added beside it.
    if name.len() <= 200 {
        return name;
    }
    let digest = crate::crafter::trace::sha256_hex(names.join(",").as_bytes());
    format!(
        "matrix_{}models-{}_{settings}.csv",
        names.len(),
        &digest[..12]
    )
}

/// The flags of one model of the matrix: the shared flags with the entry's own keys over them.
pub(super) fn model_args(base: &RunArgs, e: &ModelEntry) -> RunArgs {
    let mut a = base.clone();
    a.models = Vec::new();
    a.model = Some(e.model.clone());
    macro_rules! own {
        ($($f:ident),*) => { $( if e.$f.is_some() { a.$f = e.$f.clone(); } )* };
    }
    own!(
        base_url,
        api_key_env,
        api_key_file,
        price_in,
        price_cached_in,
        price_out,
        run_name
    );
    if !e.headers.is_empty() {
        a.headers = e.headers.clone();
    }
    a
}

/// Play every model of the matrix and print their comparison; the exit code is the worst of
/// the models' (as for one run: 0, 1 for errored episodes, 130 when interrupted).
/// With `view` (the `--view` server's base URL), each model's live page is printed once its
/// folder is planned.
pub(super) fn run_matrix(
    a: RunArgs,
    entries: Vec<ModelEntry>,
    view: Option<&str>,
) -> Result<i32, CliError> {
    // Every model's price checked, then every model resolved, so that bad input fails
    // before anything plays (and before any texture warning).
    for e in &entries {
        let mut args = model_args(&a, e);
        super::limits::check(&mut args)?;
        super::resolve::check_price(&args)?;
    }
    let mut textures = None;
    let mut resolved = Vec::new();
    let mut folders: Vec<(PathBuf, String)> = Vec::new();
    for e in &entries {
        // An entry's own keys (prices, endpoint) are checked as the flags were.
        let mut args = model_args(&a, e);
        super::limits::check(&mut args)?;
        let rr = resolve_run(&args, textures.clone())?;
        textures = Some(rr.textures.clone());
        let dir = rr.out.join(&rr.run_name);
        if let Some((_, other)) = folders.iter().find(|(d, _)| *d == dir) {
            return Err(CliError::usage(format!(
                "models {other:?} and {:?} would both write to {}: give one of them its own run-name in a [[models]] entry",
                e.model,
                dir.display()
            )));
        }
        folders.push((dir, e.model.clone()));
        resolved.push(rr);
    }
    let Some(first) = resolved.first() else {
        return Err(CliError::usage(
            "no model to run: give --model a,b or [[models]] entries",
        ));
    };
    let csv = first.out.join(matrix_csv_name(
        &entries,
        &settings_name(
            &first.r,
            first.balrog_layout,
            a.frames.unwrap_or_default(),
            a.shard.map(|s| s.name_suffix()),
        ),
    ));
    let mut plans = Vec::new();
    for rr in resolved {
        let info = run_record(&rr)?;
        plans.push(plan_run(rr, info)?);
    }
    if let Some(base) = view {
        for (plan, e) in plans.iter().zip(&entries) {
            let url = crate::view::run_page_url(base, &plan.store.root);
            eprintln!("live view: {}: {url}", e.model);
        }
    }

    let multi = MultiProgress::new();
    let outcomes = runtime()?.block_on(futures::future::join_all(
        plans.into_iter().zip(&entries).map(|(plan, e)| {
            let display = Display {
                multi: Some(multi.clone()),
                label: Some(e.model.clone()),
            };
            async move { start_run(plan, &display).await }
        }),
    ));
    let mut worst = 0;
    for (outcome, e) in outcomes.iter().zip(&entries) {
        let code = match outcome {
            Ok(o) => exit_code(o, a.allow_errors),
            Err(err) => {
                eprintln!("error: {}: {}", e.model, err.message);
                err.code
            }
        };
        worst = worst.max(code);
    }

    let mut runs = Vec::new();
    for (dir, model) in &folders {
        match open_run(dir) {
            Ok(run) => runs.push(run),
            Err(err) => eprintln!("note: {model}: no run to compare ({err})"),
        }
    }
    if !runs.is_empty() {
        let columns = parse_columns(None).map_err(CliError::usage)?;
        if a.quiet {
            write_comparison(&runs, GroupBy::Run, &columns, &csv)?;
        } else {
            print_comparison(&runs, GroupBy::Run, &columns, Some(&csv), true)?;
        }
        println!(
            "comparison: {} (spend: {})",
            csv.display(),
            sibling(&csv, "spend").display()
        );
    }
    for (dir, _) in &folders {
        println!("results: {}", dir.display());
    }
    Ok(worst)
}
