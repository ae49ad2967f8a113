//! `vlm-eval presets`: the presets and what each sets; `vlm-eval presets NAME` prints a
//! preset's file.

use clap::Args;

use super::error::CliError;
use crate::agent::preset::Preset;

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
        println!(
            "{}: {}\n  compares with: {}\n",
            p.name, p.description, p.reproduces
        );
    }
    let mut b = tabled::builder::Builder::default();
    let mut header = vec!["setting".to_string()];
    header.extend(all.iter().map(|p| p.name.clone()));
    b.push_record(header);
    let settings: Vec<Vec<(&str, String)>> = all.iter().map(Preset::settings).collect();
    for (i, (key, _)) in settings[0].iter().enumerate() {
        let mut row = vec![key.to_string()];
        row.extend(settings.iter().map(|s| s[i].1.clone()));
        b.push_record(row);
    }
    let mut table = b.build();
    table.with(tabled::settings::Style::rounded());
    println!("{table}");
    println!(
        "Use: vlm-eval run --preset NAME (or preset = \"NAME\" in --config); flags override a preset's settings. \
layout, reset-noop, render-twice, content-parts and feedback come only from the preset. \
`vlm-eval presets NAME` prints its file; docs/PRESETS.md says what each reproduces."
    );
    Ok(0)
}
