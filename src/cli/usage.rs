//! Command-line parsing with clap's usage errors on one line: the error, clap's tip when it has
//! one, and the subcommand's help to read (`see 'vlm-eval bench env --help'`). Help and version
//! print as clap prints them.

use super::Cli;
use clap::error::ErrorKind;
use clap::Parser;

/// Parse `args` (with the default subcommand already inserted); a usage error prints one line
/// on stderr and exits 2.
pub fn parse_or_exit(args: Vec<std::ffi::OsString>) -> Cli {
    let command = command_path(&args);
    match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                eprintln!("{}", one_line(&e.render().to_string(), &command));
                std::process::exit(2);
            }
        },
    }
}

/// The subcommand the arguments name (`vlm-eval bench env`), from clap's own tree: the
/// leading words that are subcommands, flags before them skipped.
fn command_path(args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["vlm-eval".to_string()];
    for arg in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if arg.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(arg) {
            Some(sub) => {
                path.push(arg.to_string());
                cmd = sub.clone();
            }
            None => break,
        }
    }
    path.join(" ")
}

/// clap's rendered error (first line `error: …`, maybe `tip: …`, then usage) as one line that
/// points to `command`'s help.
pub fn one_line(rendered: &str, command: &str) -> String {
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut first = lines
        .first()
        .copied()
        .unwrap_or("error: the command line could not be read")
        .to_string();
    // `…were not provided:` lists the missing arguments on the lines below (`<RUNS>...`):
    // they join the line, and so does the usage line that shows where they go.
    if first.ends_with(':') {
        let listed: Vec<&str> = lines
            .iter()
            .skip(1)
            .take_while(|l| !is_trailer(l))
            .copied()
            .collect();
        if !listed.is_empty() {
            first = format!("{first} {}", listed.join(", "));
        }
        if let Some(usage) = lines.iter().find_map(|l| l.strip_prefix("Usage: ")) {
            first = format!("{first} (usage: {usage})");
        }
    }
    let tip = lines
        .iter()
        .find_map(|l| l.strip_prefix("tip: "))
        .map(|t| format!(" ({t})"))
        .unwrap_or_default();
    // An enum flag's choices (`[possible values: all, sent, none]`) stay on the line.
    let values = lines
        .iter()
        .find(|l| l.starts_with("[possible values:"))
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    format!("{first}{values}{tip}; see '{command} --help'")
}

/// A line of clap's rendering after the error's own lines.
fn is_trailer(line: &str) -> bool {
    [
        "Usage:",
        "tip:",
        "For more information",
        "[possible values:",
    ]
    .iter()
    .any(|p| line.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let rendered = "error: unexpected argument '--seedz' found\n\n  tip: a similar argument \
                        exists: '--seeds'\n\nUsage: vlm-eval run --model <MODEL> --seeds <SEEDS>\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered, "vlm-eval run"),
            "error: unexpected argument '--seedz' found (a similar argument exists: '--seeds'); \
             see 'vlm-eval run --help'"
        );
        let missing =
            "error: the following required arguments were not provided:\n  --out <OUT>\n  \
                       <RUNS>...\n\nUsage: vlm-eval merge --out <OUT> <RUNS>...\n\nFor more \
                       information, try '--help'.\n";
        assert_eq!(
            one_line(missing, "vlm-eval merge"),
            "error: the following required arguments were not provided: --out <OUT>, <RUNS>... \
             (usage: vlm-eval merge --out <OUT> <RUNS>...); see 'vlm-eval merge --help'"
        );
        assert_eq!(
            one_line("", "vlm-eval"),
            "error: the command line could not be read; see 'vlm-eval --help'"
        );
    }

    #[test]
    fn command_path_follows_clap_subcommands() {
        let path = |a: &[&str]| command_path(&a.iter().map(|s| s.into()).collect::<Vec<_>>());
        assert_eq!(
            path(&["vlm-eval", "bench", "env", "--steps"]),
            "vlm-eval bench env"
        );
        assert_eq!(
            path(&["vlm-eval", "--wide", "run", "--seeds", "x"]),
            "vlm-eval run"
        );
        assert_eq!(path(&["vlm-eval", "nonsense"]), "vlm-eval");
    }
}
