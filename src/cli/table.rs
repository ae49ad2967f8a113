//! Terminal tables that fit the terminal. The width is `$COLUMNS` when set (a whole number,
//! else exit 2), else the terminal's width when stdout is one, else 120; a table wider than
//! that loses columns in its stated order (the `*_DROP` lists below, first name dropped
//! first; the first column is never dropped), and when it is still too wide its widest cells
//! are abbreviated with `…`. A line under the table says what was hidden (as many names as
//! fit the width, then `and N more`) and that `--wide` shows everything. `--wide` (a global flag) prints every column in full. CSV files are
//! never touched by any of this, and lines of prose printed under tables stay whole (a
//! terminal wraps them harmlessly, and scripts search them). docs/GUIDE.md#tables-that-fit
//! repeats the orders.

use std::sync::OnceLock;

use tabled::settings::peaker::PriorityMax;
use tabled::settings::{Style, Width};

use super::error::CliError;
use crate::report::compare::Table;

/// The width used when `$COLUMNS` is unset and stdout is not a terminal.
pub const DEFAULT_WIDTH: usize = 120;
/// Tables are never fitted narrower than this (a smaller `$COLUMNS` is treated as this).
pub const MIN_WIDTH: usize = 40;

/// The run summary (`vlm-eval run`): `model` and `progression` always stay.
pub const RUN_DROP: &[&str] = &[
    "tokens",
    "cost",
    "latency p50/p95",
    "replies exact/repaired",
    "steps",
    "achievements",
    "deaths",
    "crafter score",
    "episodes",
];
/// `compare`'s main table (and the model matrix's): the first column, `progression % ± SE`
/// and `protocol` always stay. Tokens and cost go first: the spend table below repeats them.
pub const COMPARE_DROP: &[&str] = &[
    "tokens",
    "cost",
    "latency p50",
    "repaired replies",
    "return",
    "steps",
    "invalid actions",
    "score",
    "exact replies",
    "deaths",
    "crafter score %",
    "model",
    "runs",
    "episodes",
];
/// The spend table: the first column and `cost` always stay.
pub const SPEND_DROP: &[&str] = &[
    "retries",
    "requests",
    "cached input",
    "output tokens",
    "input tokens",
];
/// `compare --paired`: the run, the delta, its interval and p always stay (`vs` is the first
/// run, named in the title).
pub const PAIRED_DROP: &[&str] = &[
    "vs",
    "only in vs",
    "only in run",
    "vs mean %",
    "run mean %",
    "shared seeds",
];
/// The leaderboard's summary: protocol, leader and progression always stay.
pub const LEADERBOARD_DROP: &[&str] = &["runs"];
/// Tables whose columns are all alike (the achievement matrix, `presets`): nothing is
/// dropped, the widest cells are abbreviated.
pub const NO_DROP: &[&str] = &[];

/// How tables are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Fit this many columns.
    Width(usize),
    /// Every column in full (`--wide`).
    Wide,
}

static FIT: OnceLock<Fit> = OnceLock::new();

/// Resolve how this process prints tables (`--wide`, `$COLUMNS`, the terminal) once, before a
/// command that prints tables starts. Without `--wide`, a `$COLUMNS` that is not a whole number
/// is exit 2.
pub fn init(wide: bool) -> Result<Fit, CliError> {
    if wide {
        // Every column in full: the width (and so $COLUMNS) is not read.
        return Ok(*FIT.get_or_init(|| Fit::Wide));
    }
    let columns = std::env::var_os("COLUMNS");
    let terminal = console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| cols as usize);
    let width = width_from(columns.as_deref(), terminal)?;
    Ok(*FIT.get_or_init(|| Fit::Width(width)))
}

/// How tables are printed: what `init` resolved, else 120 columns.
pub fn fit() -> Fit {
    FIT.get().copied().unwrap_or(Fit::Width(DEFAULT_WIDTH))
}

/// The width from `$COLUMNS` (unset or empty: the terminal's width, else 120).
pub fn width_from(
    columns: Option<&std::ffi::OsStr>,
    terminal: Option<usize>,
) -> Result<usize, CliError> {
    let fallback = terminal.filter(|w| *w > 0).unwrap_or(DEFAULT_WIDTH);
    let Some(raw) = columns else {
        return Ok(fallback);
    };
    let text = raw.to_string_lossy();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(fallback);
    }
    match trimmed.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(CliError::usage(format!(
            "COLUMNS must be a whole number of columns (got '{text}'); unset it, set it to your terminal's width (e.g. COLUMNS=120), or pass --wide to print every column"
        ))),
    }
}

fn build(t: &Table, keep: &[usize]) -> tabled::Table {
    let mut b = tabled::builder::Builder::default();
    b.push_record(keep.iter().map(|&i| t.header[i].clone()));
    for r in &t.rows {
        b.push_record(keep.iter().map(|&i| r.get(i).cloned().unwrap_or_default()));
    }
    let mut table = b.build();
    table.with(Style::rounded());
    table
}

/// Render a table for the terminal, fitted as `fit` says: columns named in `drop` go in that
/// order (never the first column) while the table is too wide, then the widest cells are
/// abbreviated; a note under the table names what was hidden.
pub fn render_fitted(t: &Table, drop: &[&str], fit: Fit) -> String {
    let all: Vec<usize> = (0..t.header.len()).collect();
    let Fit::Width(width) = fit else {
        return build(t, &all).to_string();
    };
    let width = width.max(MIN_WIDTH);
    let mut keep = all;
    let mut hidden: Vec<&str> = Vec::new();
    let mut table = build(t, &keep);
    let mut order = drop.iter();
    while table.total_width() > width {
        let Some(name) = order.next() else { break };
        if let Some(pos) = keep
            .iter()
            .skip(1)
            .position(|&i| t.header[i] == *name)
            .map(|p| p + 1)
        {
            hidden.push(&t.header[keep[pos]]);
            keep.remove(pos);
            table = build(t, &keep);
        }
    }
    let abbreviated = table.total_width() > width;
    if abbreviated {
        table.with(
            Width::truncate(width)
                .suffix("…")
                .priority(PriorityMax::right()),
        );
    }
    let mut out = table.to_string();
    let note = match (hidden.is_empty(), abbreviated) {
        (true, false) => return out,
        (true, true) => {
            format!("cells abbreviated (…) to fit {width} columns; --wide shows them in full")
        }
        (false, abbreviated) => hidden_note(&hidden, width, abbreviated),
    };
    out.push('\n');
    out.push_str(&wrap(&note, width));
    out
}

/// The note naming the hidden columns, on one line of at most `width` characters: as many
/// names as fit, first dropped first, then `and N more` (a width too narrow even for one name
/// is wrapped by the caller).
fn hidden_note(hidden: &[&str], width: usize, abbreviated: bool) -> String {
    let tail = if abbreviated {
        ", and cells abbreviated (…); --wide shows everything"
    } else {
        "; --wide shows every column"
    };
    let line = |k: usize| {
        let more = match hidden.len() - k {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "hidden to fit {width} columns: {}{more}{tail}",
            hidden[..k].join(", ")
        )
    };
    (1..=hidden.len())
        .rev()
        .map(line)
        .find(|l| l.chars().count() <= width)
        .unwrap_or_else(|| line(1))
}

/// Render with the process's fit (`fit()`).
pub fn render(t: &Table, drop: &[&str]) -> String {
    render_fitted(t, drop, fit())
}

/// Break a line at spaces so that no piece is longer than `width` characters (a single
/// longer word stays whole).
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide_table() -> Table {
        let header: Vec<String> = ["run", "model", "episodes", "tokens", "cost", "progression"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let row = vec![
            "a-rather-long-run-name_s10_t10".to_string(),
            "gpt-4o-mini-2024-07-18".to_string(),
            "10/10".to_string(),
            "123456 in / 7890 out".to_string(),
            "$0.0123".to_string(),
            "12.3 ± 4.5".to_string(),
        ];
        Table {
            header,
            rows: vec![row.clone(), row],
        }
    }

    fn longest(s: &str) -> usize {
        s.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn columns_go_in_the_stated_order_and_the_note_names_them() {
        let t = wide_table();
        let full = render_fitted(&t, &["tokens", "cost", "model"], Fit::Wide);
        assert!(longest(&full) > 80, "{full}");
        assert!(full.contains("123456 in / 7890 out"));
        // 117 columns in full; without tokens and cost 84, so at 90 the model stays.
        let fitted = render_fitted(&t, &["tokens", "cost", "model"], Fit::Width(90));
        assert!(longest(&fitted) <= 90, "{fitted}");
        assert!(
            !fitted.contains("7890 out") && !fitted.contains("$0.0123"),
            "{fitted}"
        );
        assert!(fitted.contains("gpt-4o-mini-2024-07-18"), "{fitted}");
        assert!(
            fitted.contains("hidden to fit 90 columns: tokens, cost; --wide"),
            "{fitted}"
        );
        // At 80 the model goes too, as the order says.
        let fitted = render_fitted(&t, &["tokens", "cost", "model"], Fit::Width(80));
        assert!(
            longest(&fitted) <= 80 && !fitted.contains("gpt-4o"),
            "{fitted}"
        );
        assert!(fitted.contains("hidden to fit 80 columns: tokens, cost, model; --wide"));
        // Nothing left to drop: abbreviated, never wider than asked.
        let narrow = render_fitted(&t, &[], Fit::Width(50));
        assert!(longest(&narrow) <= 50, "{narrow}");
        assert!(narrow.contains('…') && narrow.contains("abbreviated"));
        // Fits already: unchanged, no note.
        let roomy = render_fitted(&t, &["tokens"], Fit::Width(200));
        assert_eq!(roomy, full);
    }

    #[test]
    fn the_first_column_is_never_dropped() {
        let t = wide_table();
        let fitted = render_fitted(&t, &["run", "model", "tokens"], Fit::Width(60));
        assert!(
            fitted.contains("a-rather") && longest(&fitted) <= 60,
            "{fitted}"
        );
    }

    #[test]
    fn columns_must_be_a_whole_number() {
        use std::ffi::OsStr;
        assert_eq!(width_from(None, None).unwrap(), DEFAULT_WIDTH);
        assert_eq!(width_from(None, Some(90)).unwrap(), 90);
        assert_eq!(width_from(Some(OsStr::new("")), None).unwrap(), 120);
        assert_eq!(width_from(Some(OsStr::new("80")), Some(200)).unwrap(), 80);
        for bad in ["abc", "0", "-5", "80.5"] {
            let e = width_from(Some(OsStr::new(bad)), None).unwrap_err();
            assert_eq!(e.code, 2);
            assert!(
                e.message.starts_with(&format!(
                    "COLUMNS must be a whole number of columns (got '{bad}')"
                )),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn the_hidden_note_fits_its_width_on_one_line() {
        let names = [
            "tokens",
            "cost",
            "latency p50",
            "repaired replies",
            "return",
            "steps",
            "invalid actions",
            "score",
            "exact replies",
        ];
        let all = hidden_note(&names, 200, false);
        assert_eq!(
            all,
            format!(
                "hidden to fit 200 columns: {}; --wide shows every column",
                names.join(", ")
            )
        );
        for abbreviated in [false, true] {
            let note = hidden_note(&names, 120, abbreviated);
            assert!(note.chars().count() <= 120, "{note}");
            assert!(
                note.starts_with("hidden to fit 120 columns: tokens, cost,"),
                "{note}"
            );
            assert!(note.contains(" more"), "{note}");
        }
        let note = hidden_note(&names, 120, false);
        let shown = note
            .trim_start_matches("hidden to fit 120 columns: ")
            .split(" and ")
            .next()
            .unwrap()
            .split(", ")
            .count();
        assert!(
            note.contains(&format!(" and {} more;", names.len() - shown)),
            "{note}"
        );
    }

    #[test]
    fn notes_wrap_at_the_width() {
        let w = wrap("one two three four five six", 9);
        assert_eq!(w, "one two\nthree\nfour five\nsix");
    }
}
