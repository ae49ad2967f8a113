//! The three texts of BALROG's protocol that are prose, read at run time from a BALROG
//! checkout the user names (never copied into this project): the Crafter instruction prompt
//! (`balrog/environments/crafter/__init__.py`, built from `ACTIONS` in `env.py`), the naive
//! agent's instruction (`balrog/agents/naive.py`) and the evaluator's invalid-reply feedback
//! (`balrog/evaluator.py`). Their sha256 values at commit af7d1f1 are pinned here (hashes are
//! facts, not prose); a checkout whose texts hash differently is reported as drift.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use super::pysrc::{
    after, find_assignment, literal_at, skip_space, squeeze, string_dict_at, string_list_at,
};
use crate::crafter::trace::sha256_hex;

/// The BALROG commit the `balrog` preset reproduces.
pub const PINNED_COMMIT: &str = "af7d1f1";
/// Where BALROG lives.
pub const BALROG_REPO: &str = "https://github.com/balrog-ai/BALROG";

/// sha256 of each text at the pinned commit (the feedback as its template, `{action}` unfilled).
pub const PINNED_TEXTS: [(&str, &str); 3] = [
    (
        "instruction_prompt",
        "96b71528bcc33d337082b2813936c584895237f7403b7b743fb7f2f08e8625ea",
    ),
    (
        "naive_instruction",
        "75a63769aefad1733404a05b7e48de03849bb6931609553fab41640b9a053903",
    ),
    (
        "feedback",
        "5a837558e57f36703b291c90162596253fad04b46dbf3448d57f4f600a404028",
    ),
];

/// sha256 of the BALROG files whose texts or behaviour the preset reproduces, at the pinned
/// commit (a differing file is a warning: its texts may still match).
pub const PINNED_FILES: [(&str, &str); 7] = [
    (
        "balrog/environments/crafter/__init__.py",
        "82b545b80394a8564b4d0455886157c9f3d48d37067ee9d4a402ba6336a171eb",
    ),
    (
        "balrog/environments/crafter/env.py",
        "99d9da1b4858322ca5a821c14964c4290acff55c9b046e4901f9f266575e5d9e",
    ),
    (
        "balrog/agents/naive.py",
        "2c654418ddda445f1fde810523b37024d05d1a3a22b0b5830db92ee8fd8355ef",
    ),
    (
        "balrog/evaluator.py",
        "5abe638a10e9dfa73076430fef2fd288de1f401d978bc60ebd149ad8ed6005d2",
    ),
    (
        "balrog/prompt_builder/history.py",
        "ff5fde15d16d351abee51dfcde92bce9ff309021d2144de6f9050eaeba78fb00",
    ),
    (
        "balrog/client.py",
        "74e544ab87b008fe0d3d02ac1139b043d50338c56bc56af5a999babe0ebe20e1",
    ),
    (
        "balrog/environments/env_wrapper.py",
        "a2bb22fc891f4908a5f2a5336cb57b7e1c300e0b9ca06b0c75728c419bf269af",
    ),
];

const INIT: &str = "balrog/environments/crafter/__init__.py";
const ENV: &str = "balrog/environments/crafter/env.py";
const NAIVE: &str = "balrog/agents/naive.py";
const EVALUATOR: &str = "balrog/evaluator.py";

/// A BALROG checkout that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BalrogError {
    /// A file the preset reads is missing.
    #[error("{dir} is not a BALROG checkout: {file} is missing (git clone {BALROG_REPO} and check out {PINNED_COMMIT}, then pass --balrog-src DIR)")]
    NotCheckout {
        /// The directory given.
        dir: String,
        /// The missing file, relative to it.
        file: &'static str,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A text could not be found where commit af7d1f1 has it.
    #[error("cannot read BALROG's {what} from {path}: {message} (its code differs from commit {PINNED_COMMIT}; check out {PINNED_COMMIT})")]
    Parse {
        /// Which text.
        what: &'static str,
        /// The file.
        path: String,
        /// What was not as expected.
        message: String,
    },
}

/// One text read from the checkout.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TextRecord {
    /// `instruction_prompt`, `naive_instruction` or `feedback`.
    pub name: &'static str,
    /// The file it came from, relative to the checkout.
    pub file: &'static str,
    /// The text (the feedback as its template, with `{action}`).
    pub text: String,
    /// Its sha256.
    pub sha256: String,
    /// The sha256 at the pinned commit.
    pub pinned_sha256: &'static str,
}

/// One source file's hash.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileRecord {
    /// Path relative to the checkout.
    pub path: &'static str,
    /// Its sha256 (None when absent).
    pub sha256: Option<String>,
    /// The sha256 at the pinned commit.
    pub pinned_sha256: &'static str,
}

/// BALROG's texts as read from a checkout.
#[derive(Clone, Debug, PartialEq)]
pub struct BalrogTexts {
    /// The checkout.
    pub source: PathBuf,
    /// The Crafter instruction prompt (sent as the first user message).
    pub instruction_prompt: String,
    /// The naive agent's instruction (appended to the current observation).
    pub naive_instruction: String,
    /// The feedback template, with `{action}` where the played action goes.
    pub feedback_template: String,
    /// The three texts with their hashes.
    pub texts: Vec<TextRecord>,
    /// The source files' hashes.
    pub files: Vec<FileRecord>,
}

fn read(dir: &Path, file: &'static str) -> Result<String, BalrogError> {
    let path = dir.join(file);
    if !path.is_file() {
        return Err(BalrogError::NotCheckout {
            dir: dir.display().to_string(),
            file,
        });
    }
    std::fs::read_to_string(&path).map_err(|source| BalrogError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Python's `str.strip()`.
fn strip(s: &str) -> String {
    crate::agent::parse::py_strip(s).to_string()
}

/// `<literal>.strip()` at `i`: the stripped value.
fn stripped_literal(src: &str, i: usize) -> Result<(String, Vec<String>, usize), String> {
    let lit = literal_at(src, skip_space(src, i))?;
    let rest = &src[lit.end..];
    if !rest.starts_with(".strip()") {
        return Err("the literal is not followed by .strip()".into());
    }
    Ok((strip(&lit.value), lit.fields, lit.end + ".strip()".len()))
}

fn instruction_prompt(init: &str, env: &str) -> Result<String, String> {
    let actions_at = find_assignment(env, "ACTIONS")?;
    let (actions, _) = string_list_at(env, actions_at)?;
    let dict_at = find_assignment(init, "ACTION_DICT")?;
    let (dict, _) = string_dict_at(init, dict_at)?;
    let func = after(init, 0, "def get_instruction_prompt(").ok_or("no get_instruction_prompt")?;
    let strings_at = find_assignment(&init[func..], "action_strings")? + func;
    let line_end = init[strings_at..]
        .find('\n')
        .map_or(init.len(), |k| strings_at + k);
    let expected = r#"",\n".join(f"{action}: {ACTION_DICT[action]}" for action in ACTIONS)"#;
    if squeeze(&init[strings_at..line_end]) != squeeze(expected) {
        return Err("action_strings is built differently".into());
    }
    let prompt_at = find_assignment(&init[func..], "instruction_prompt")? + func;
    let (template, fields, _) = stripped_literal(init, prompt_at)?;
    if fields != ["action_strings"] {
        return Err(format!(
            "the prompt has fields {fields:?}, not [action_strings]"
        ));
    }
    let mut lines = Vec::with_capacity(actions.len());
    for a in &actions {
        let d = dict
            .iter()
            .find(|(k, _)| k == a)
            .ok_or_else(|| format!("ACTION_DICT has no entry for {a:?}"))?;
        lines.push(format!("{a}: {}", d.1));
    }
    // The literal was stripped already; the field sits inside it.
    Ok(template.replace("{action_strings}", &lines.join(",\n")))
}

fn naive_instruction(naive: &str) -> Result<String, String> {
    let at = find_assignment(naive, "naive_instruction")?;
    let (text, fields, _) = stripped_literal(naive, at)?;
    if !fields.is_empty() {
        return Err("naive_instruction has replacement fields".into());
    }
    Ok(text)
}

fn feedback_template(evaluator: &str) -> Result<String, String> {
    let target = r#"obs["text"]["long_term_context"]"#;
    let mut from = 0;
    while let Some(k) = evaluator[from..].find(target) {
        let start = from + k;
        from = start + target.len();
        let mut i = skip_space(evaluator, from);
        if !evaluator[i..].starts_with('=') || evaluator[i..].starts_with("==") {
            continue;
        }
        i = skip_space(evaluator, i + 1);
        if evaluator[i..].starts_with('(') {
            i = skip_space(evaluator, i + 1);
        }
        let Ok(lit) = literal_at(evaluator, i) else {
            continue;
        };
        let rest = skip_space(evaluator, lit.end);
        if !evaluator[rest..].starts_with('+')
            || !evaluator[skip_space(evaluator, rest + 1)..].starts_with(target)
        {
            return Err("the feedback is no longer prefixed to long_term_context".into());
        }
        if lit.fields != ["action"] {
            return Err(format!(
                "the feedback has fields {:?}, not [action]",
                lit.fields
            ));
        }
        return Ok(lit.value);
    }
    Err("no feedback prefixed to long_term_context".into())
}

impl BalrogTexts {
    /// Read the texts from a checkout.
    pub fn load(dir: &Path) -> Result<BalrogTexts, BalrogError> {
        let init = read(dir, INIT)?;
        let env = read(dir, ENV)?;
        let naive = read(dir, NAIVE)?;
        let evaluator = read(dir, EVALUATOR)?;
        let parse = |what, file: &str| {
            let path = dir.join(file).display().to_string();
            move |message: String| BalrogError::Parse {
                what,
                path,
                message,
            }
        };
        let instruction =
            instruction_prompt(&init, &env).map_err(parse("instruction prompt", INIT))?;
        let naive_text = naive_instruction(&naive).map_err(parse("naive instruction", NAIVE))?;
        let feedback =
            feedback_template(&evaluator).map_err(parse("feedback sentence", EVALUATOR))?;
        let record = |name: &'static str, file: &'static str, text: &str| TextRecord {
            name,
            file,
            text: text.to_string(),
            sha256: sha256_hex(text.as_bytes()),
            pinned_sha256: PINNED_TEXTS
                .iter()
                .find(|(n, _)| *n == name)
                .map_or("", |(_, h)| h),
        };
        let texts = vec![
            record("instruction_prompt", INIT, &instruction),
            record("naive_instruction", NAIVE, &naive_text),
            record("feedback", EVALUATOR, &feedback),
        ];
        let files = PINNED_FILES
            .iter()
            .map(|(path, pinned)| FileRecord {
                path,
                sha256: std::fs::read(dir.join(path)).ok().map(|b| sha256_hex(&b)),
                pinned_sha256: pinned,
            })
            .collect();
        Ok(BalrogTexts {
            source: dir.to_path_buf(),
            instruction_prompt: instruction,
            naive_instruction: naive_text,
            feedback_template: feedback,
            texts,
            files,
        })
    }

    /// Names of the texts whose sha256 differs from the pinned commit's.
    pub fn drift(&self) -> Vec<&'static str> {
        self.texts
            .iter()
            .filter(|t| t.sha256 != t.pinned_sha256)
            .map(|t| t.name)
            .collect()
    }

    /// Source files that differ from (or are missing at) the pinned commit.
    pub fn file_drift(&self) -> Vec<&'static str> {
        self.files
            .iter()
            .filter(|f| f.sha256.as_deref() != Some(f.pinned_sha256))
            .map(|f| f.path)
            .collect()
    }

    /// The feedback for a played action (BALROG's default action is `Noop`).
    pub fn feedback(&self, action: &str) -> String {
        self.feedback_template.replace("{action}", action)
    }

    /// One hash over the three texts (run.json's `prompt_sha256` under the balrog layout).
    pub fn prompt_sha256(&self) -> String {
        let all = json!([
            self.instruction_prompt,
            self.naive_instruction,
            self.feedback_template
        ]);
        sha256_hex(all.to_string().as_bytes())
    }

    /// What run.json records.
    pub fn record(&self, allowed_drift: bool) -> Value {
        json!({
            "source": self.source,
            "pinned_commit": PINNED_COMMIT,
            "texts": self.texts,
            "files": self.files,
            "drift": self.drift(),
            "file_drift": self.file_drift(),
            "allow_drift": allowed_drift,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> Option<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/balrog/reference");
        dir.join(INIT).is_file().then_some(dir)
    }

    #[test]
    fn the_reference_checkout_matches_the_pins() {
        let Some(dir) = reference() else {
            println!("SKIP: ../shared/balrog/reference not present");
            return;
        };
        let t = BalrogTexts::load(&dir).unwrap();
        assert!(t.drift().is_empty(), "{:?}", t.texts);
        assert!(t.file_drift().is_empty());
        assert!(t.feedback("Noop").contains("Noop") && !t.feedback("Noop").contains('{'));
        assert!(t.instruction_prompt.contains("Move West: "));
    }

    #[test]
    fn a_changed_checkout_is_drift_and_a_broken_one_an_error() {
        let Some(src) = reference() else {
            println!("SKIP: ../shared/balrog/reference not present");
            return;
        };
        let tmp = std::env::temp_dir().join(format!("vlm-eval-balrog-{}", std::process::id()));
        for (file, _) in PINNED_FILES {
            let to = tmp.join(file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(src.join(file), to).unwrap();
        }
        let naive = tmp.join(NAIVE);
        let text = std::fs::read_to_string(&naive).unwrap();
        std::fs::write(
            &naive,
            text.replacen("one of the above", "one of the listed", 1),
        )
        .unwrap();
        let t = BalrogTexts::load(&tmp).unwrap();
        assert_eq!(t.drift(), ["naive_instruction"]);
        assert_eq!(t.file_drift(), [NAIVE]);
        std::fs::write(&naive, "naive_instruction = compute()\n").unwrap();
        let e = BalrogTexts::load(&tmp).unwrap_err().to_string();
        assert!(
            e.contains("naive instruction") && e.contains("af7d1f1"),
            "{e}"
        );
        std::fs::remove_file(tmp.join(EVALUATOR)).unwrap();
        let e = BalrogTexts::load(&tmp).unwrap_err().to_string();
        assert!(
            e.contains("not a BALROG checkout") && e.contains("evaluator.py"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
