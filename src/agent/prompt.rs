//! Prompt templates: built in (`prompts/*.txt`, compiled in) or read from `--prompts DIR`,
//! with `{placeholders}` filled in.

use std::path::Path;

use crate::crafter::Action;

use super::parse::Protocol;
use super::tools::{display_name, TOOL_NAME};

const SYSTEM_TOOL: &str = include_str!("../../prompts/system_tool.txt");
const SYSTEM_TEXT: &str = include_str!("../../prompts/system_text.txt");

/// The file names `--prompts DIR` is read for.
pub const PROMPT_FILES: [&str; 2] = ["system_tool.txt", "system_text.txt"];

/// A problem with a prompt directory.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// A template file could not be read.
    #[error("cannot read prompt template {path}: {source} (fix the file or drop --prompts to use the built-in prompts)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The directory holds none of the template files (a wrong folder, or misspelled names).
    #[error("--prompts {dir} holds none of the files it reads ({files}); put at least one there or drop --prompts to use the built-in prompts")]
    NoTemplates { dir: String, files: String },
    /// A template has a placeholder we do not know.
    #[error("prompt template {path} uses unknown placeholder {{{name}}} (known: action_list, tool_name, max_actions)")]
    Placeholder { path: String, name: String },
}

/// The templates for one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompts {
    /// System prompt for the tool protocol.
    pub system_tool: String,
    /// System prompt for the text protocol.
    pub system_text: String,
}

fn describe(a: Action) -> &'static str {
    match a {
        Action::Noop => "do nothing",
        Action::MoveLeft => "move west (left)",
        Action::MoveRight => "move east (right)",
        Action::MoveUp => "move north (up)",
        Action::MoveDown => "move south (down)",
        Action::Do => "collect the facing material, drink water, attack or eat the facing creature",
        Action::Sleep => "sleep (restores energy; you are vulnerable)",
        Action::PlaceStone => "place stone on the facing tile (needs 1 stone)",
        Action::PlaceTable => "place a table on the facing tile (needs 2 wood)",
        Action::PlaceFurnace => "place a furnace on the facing tile (needs 4 stone; table nearby)",
        Action::PlacePlant => "plant a sapling on the facing grass (needs 1 sapling)",
        Action::MakeWoodPickaxe => "make a wood pickaxe (1 wood; nearby table)",
        Action::MakeStonePickaxe => "make a stone pickaxe (1 wood, 1 stone; nearby table)",
        Action::MakeIronPickaxe => {
            "make an iron pickaxe (1 wood, 1 coal, 1 iron; nearby table and furnace)"
        }
        Action::MakeWoodSword => "make a wood sword (1 wood; nearby table)",
        Action::MakeStoneSword => "make a stone sword (1 wood, 1 stone; nearby table)",
        Action::MakeIronSword => {
            "make an iron sword (1 wood, 1 coal, 1 iron; nearby table and furnace)"
        }
    }
}

impl Prompts {
    /// The built-in templates.
    pub fn builtin() -> Prompts {
        Prompts {
            system_tool: SYSTEM_TOOL.to_string(),
            system_text: SYSTEM_TEXT.to_string(),
        }
    }

    /// Templates from a directory: `system_tool.txt` and `system_text.txt`; a missing file
    /// keeps the built-in one, but a directory with none of them is an error.
    pub fn load(dir: &Path) -> Result<Prompts, PromptError> {
        let mut p = Prompts::builtin();
        if !dir.is_dir() {
            return Err(PromptError::Read {
                path: dir.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
            });
        }
        if !PROMPT_FILES.iter().any(|f| dir.join(f).exists()) {
            return Err(PromptError::NoTemplates {
                dir: dir.display().to_string(),
                files: PROMPT_FILES.join(", "),
            });
        }
        let [tool, text] = PROMPT_FILES;
        for (file, slot) in [(tool, &mut p.system_tool), (text, &mut p.system_text)] {
            let path = dir.join(file);
            if path.exists() {
                *slot = std::fs::read_to_string(&path).map_err(|source| PromptError::Read {
                    path: path.display().to_string(),
                    source,
                })?;
                check_placeholders(slot, &path.display().to_string())?;
            }
        }
        Ok(p)
    }

    /// The system prompt for a protocol, placeholders filled.
    pub fn system(&self, protocol: Protocol, max_actions: usize) -> String {
        let (template, list) = match protocol {
            Protocol::Tool => (
                &self.system_tool,
                Action::ALL
                    .iter()
                    .map(|a| format!("- {}: {}", a.name(), describe(*a)))
                    .collect::<Vec<_>>(),
            ),
            Protocol::Text => (
                &self.system_text,
                Action::ALL
                    .iter()
                    .map(|a| format!("- {}: {}", display_name(*a), describe(*a)))
                    .collect(),
            ),
        };
        template
            .replace("{action_list}", &list.join("\n"))
            .replace("{tool_name}", TOOL_NAME)
            .replace("{max_actions}", &max_actions.to_string())
    }
}

fn check_placeholders(text: &str, path: &str) -> Result<(), PromptError> {
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        let is_ident =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_ident && !matches!(name, "action_list" | "tool_name" | "max_actions") {
            return Err(PromptError::Placeholder {
                path: path.to_string(),
                name: name.to_string(),
            });
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

/// The note prepended to the next observation after a reply with no usable action (with the
/// parser, so that serve-env and the Python module's session say the same).
pub use vlm_eval_parse::INVALID_NOTE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prompts_fill_every_placeholder() {
        let p = Prompts::builtin();
        let tool = p.system(Protocol::Tool, 8);
        assert!(tool.contains("interact_many") && tool.contains("1 to 8 actions"));
        assert!(tool.contains("- make_iron_sword:"));
        let text = p.system(Protocol::Text, 1);
        assert!(text.contains("- Move West:") && text.contains("ACTION:"));
        for s in [tool, text] {
            assert!(!s.contains('{'), "unfilled placeholder in {s}");
        }
    }

    #[test]
    fn prompt_dir_overrides_and_errors() {
        let dir = std::env::temp_dir().join(format!("vlm-eval-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("system_tool.txt"),
            "Play! {action_list} via {tool_name}",
        )
        .unwrap();
        let p = Prompts::load(&dir).unwrap();
        assert!(p.system(Protocol::Tool, 3).starts_with("Play! - noop"));
        assert_eq!(p.system_text, Prompts::builtin().system_text);
        std::fs::write(dir.join("system_text.txt"), "Hi {nmae}").unwrap();
        let err = Prompts::load(&dir).unwrap_err().to_string();
        assert!(
            err.contains("{nmae}") && err.contains("system_text.txt"),
            "{err}"
        );
        assert!(Prompts::load(&dir.join("missing")).is_err());
        // A folder with none of the files (say, misspelled names) is refused, naming them.
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::write(empty.join("system-tool.txt"), "x").unwrap();
        let err = Prompts::load(&empty).unwrap_err();
        assert!(matches!(err, PromptError::NoTemplates { .. }));
        let err = err.to_string();
        assert!(
            err.contains("system_tool.txt, system_text.txt") && err.contains("holds none"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
