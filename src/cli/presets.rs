//! `vlm-eval presets`: the presets and what each sets; `vlm-eval presets NAME` prints a
//! preset's file.

use clap::Args;

use super::error::CliError;
use super::table::{render, NO_DROP};
use crate::agent::preset::Preset;
use crate::report::compare::Table;

/// `vlm-eval presets` flags.
#[derive(Args, Debug)]
pub struct PresetsArgs {
    /// Print this preset's file (TOML) instead of the overview.
    pub name: Option<String>,
}

/// Run `vlm-eval presets`.
pub fn cmd_presets(a: PresetsArgs) -> Result<i32, CliError> {
    if let Some(name) = &a.name {
        let preset = Preset::builtin(name).map_err(|e| CliError::usage(e.to_string()))?;
        print!("{}", Preset::source(&preset.name).unwrap_or_default());
        return Ok(0);
    }
    let all = Preset::all().map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })?;
    for p in &all {
        println!("{}: {}", p.name, p.description);
        println!("  compares with: {}", p.reproduces);
        println!();
    }
    let mut table = Table {
        header: vec!["setting".to_string()],
        rows: Vec::new(),
    };
    table.header.extend(all.iter().map(|p| p.name.clone()));
    let settings: Vec<Vec<(&str, String)>> = all.iter().map(Preset::settings).collect();
    for (i, (key, _)) in settings[0].iter().enumerate() {
        let mut row = vec![key.to_string()];
        row.extend(settings.iter().map(|s| s[i].1.clone()));
        table.rows.push(row);
    }
    println!("{}", render(&table, NO_DROP));
    println!(
        "Use: vlm-eval run --preset NAME (or preset = \"NAME\" in --config); flags override a preset's settings. \
layout, reset-noop, render-twice, content-parts and feedback come only from the preset. \
`vlm-eval presets NAME` prints its file; docs/PRESETS.md says what each reproduces."
    );
    Ok(0)
}
