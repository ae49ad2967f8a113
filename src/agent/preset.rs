//! Presets: named protocols, one readable TOML file each under `presets/` (compiled in). A
//! preset sets the observation format, prompt layout, history and images, parser,
//! invalid-reply feedback, episode steps and game length, seeds, and sampling; explicit flags
//! override it. `vlm-eval` holds today's defaults; `balrog` reproduces BALROG's Crafter
//! evaluation (docs/PRESETS.md).

use serde::{Deserialize, Serialize};

use super::conversation::Modality;
use super::observe::ObsFormat;
use super::parse::{ParserMode, Protocol};

const VLM_EVAL: &str = include_str!("../../presets/vlm-eval.toml");
const BALROG: &str = include_str!("../../presets/balrog.toml");

/// Every built-in preset: (name, TOML source).
pub const PRESET_FILES: [(&str, &str); 2] = [("vlm-eval", VLM_EVAL), ("balrog", BALROG)];

/// The preset used when none is named.
pub const DEFAULT_PRESET: &str = "vlm-eval";

/// How requests are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// A system prompt, then a window of whole turns (user, assistant, tool result).
    VlmEval,
    /// BALROG's naive agent: the instruction as the first user message, then its event window
    /// of observations and actions, the naive instruction appended to the current observation.
    Balrog,
}

impl Layout {
    /// Its name in preset files and run.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::VlmEval => "vlm-eval",
            Layout::Balrog => "balrog",
        }
    }
}

/// What precedes the next observation after a reply with no usable action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Feedback {
    /// vlm-eval's note (`agent::prompt::INVALID_NOTE`).
    VlmEval,
    /// BALROG's feedback sentence, read from the checkout.
    Balrog,
    /// Nothing.
    None,
}

impl Feedback {
    /// Its name in preset files and run.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Feedback::VlmEval => "vlm-eval",
            Feedback::Balrog => "balrog",
            Feedback::None => "none",
        }
    }
}

/// `[observation]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ObservationSettings {
    /// Text observation format.
    pub obs_format: ObsFormat,
    /// Frame pixels (also the game's render size).
    pub image_size: usize,
    /// Text, image or both.
    pub modality: Modality,
    /// Play one noop after reset, before the first observation.
    pub reset_noop: bool,
    /// Render every frame twice, as BALROG's wrapper does (at night each render draws noise
    /// from the game's RNG, so this changes the game from dusk on).
    pub render_twice: bool,
}

/// `[prompt]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PromptSettings {
    /// Request layout.
    pub layout: Layout,
    /// Tool or text protocol.
    pub protocol: Protocol,
    /// History kept (turns; observations under the balrog layout).
    pub history: usize,
    /// Frames kept, counting the current one.
    pub image_history: usize,
    /// Actions allowed per turn.
    pub max_actions_per_turn: usize,
    /// Send `tool_choice: required`.
    pub tool_choice: bool,
    /// Send every message's content as a list of parts.
    pub content_parts: bool,
}

/// `[parser]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ParserSettings {
    /// The reply rule.
    pub parser: ParserMode,
    /// What follows a reply with no usable action.
    pub feedback: Feedback,
}

/// `[episode]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EpisodeSettings {
    /// Model turns per episode.
    pub steps: u32,
    /// Game length in env steps.
    pub episode_length: u32,
    /// Env seeds 0..N-1.
    pub seeds: u32,
}

/// `[sampling]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SamplingSettings {
    /// Temperature (absent: not sent).
    pub temperature: Option<f32>,
    /// Output token limit (absent: not sent).
    pub max_tokens: Option<u32>,
    /// `max_completion_tokens` or `max_tokens`.
    pub max_tokens_field: String,
}

/// One preset file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Preset {
    /// Its name (`--preset NAME`).
    pub name: String,
    /// What it is, one paragraph.
    pub description: String,
    /// What its numbers compare with.
    pub reproduces: String,
    /// Observation settings.
    pub observation: ObservationSettings,
    /// Prompt settings.
    pub prompt: PromptSettings,
    /// Parser settings.
    pub parser: ParserSettings,
    /// Episode settings.
    pub episode: EpisodeSettings,
    /// Sampling settings.
    pub sampling: SamplingSettings,
}

/// A preset that does not exist or does not load.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// No preset of that name.
    #[error("unknown preset '{name}': the presets are {known} (see `vlm-eval presets`)")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are, comma-separated.
        known: String,
    },
    /// A built-in file that does not parse (a build defect).
    #[error("preset file presets/{name}.toml is invalid: {message}")]
    Invalid {
        /// The preset.
        name: String,
        /// The TOML error.
        message: String,
    },
}

impl Preset {
    /// The built-in preset of this name.
    pub fn builtin(name: &str) -> Result<Preset, PresetError> {
        let name = name.trim();
        let (_, text) = PRESET_FILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| PresetError::Unknown {
                name: name.to_string(),
                known: names().join(", "),
            })?;
        toml::from_str(text).map_err(|e| PresetError::Invalid {
            name: name.to_string(),
            message: e.message().replace('\n', " "),
        })
    }

    /// Every built-in preset, in listing order.
    pub fn all() -> Result<Vec<Preset>, PresetError> {
        names().into_iter().map(Preset::builtin).collect()
    }

    /// The preset file's TOML source.
    pub fn source(name: &str) -> Option<&'static str> {
        PRESET_FILES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
    }

    /// Its settings as `(key, value)` pairs in file order, keys as the run flags name them.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "(not sent)".into());
        let o = &self.observation;
        let p = &self.prompt;
        vec![
            ("obs-format", enum_name(&o.obs_format)),
            ("image-size", o.image_size.to_string()),
            ("modality", enum_name(&o.modality)),
            ("reset-noop", o.reset_noop.to_string()),
            ("render-twice", o.render_twice.to_string()),
            ("layout", p.layout.as_str().into()),
            ("protocol", enum_name(&p.protocol)),
            ("history", p.history.to_string()),
            ("image-history", p.image_history.to_string()),
            ("max-actions-per-turn", p.max_actions_per_turn.to_string()),
            ("tool-choice", p.tool_choice.to_string()),
            ("content-parts", p.content_parts.to_string()),
            ("parser", self.parser.parser.as_str().into()),
            ("feedback", self.parser.feedback.as_str().into()),
            ("steps", self.episode.steps.to_string()),
            ("episode-length", self.episode.episode_length.to_string()),
            ("seeds", self.episode.seeds.to_string()),
            (
                "temperature",
                opt(self.sampling.temperature.map(|t| t.to_string())),
            ),
            (
                "max-tokens",
                opt(self.sampling.max_tokens.map(|t| t.to_string())),
            ),
            ("max-tokens-field", self.sampling.max_tokens_field.clone()),
        ]
    }
}

/// The serde name of a unit enum value.
fn enum_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The built-in preset names.
pub fn names() -> Vec<&'static str> {
    PRESET_FILES.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_loads_under_its_own_name() {
        for p in Preset::all().unwrap() {
            assert_eq!(Preset::builtin(&p.name).unwrap().name, p.name);
            assert_eq!(p.settings().len(), 20);
        }
        let e = Preset::builtin("balrg").unwrap_err().to_string();
        assert!(
            e.contains("'balrg'") && e.contains("vlm-eval, balrog"),
            "{e}"
        );
    }

    #[test]
    fn balrog_preset_is_bal_rogs_configuration() {
        let b = Preset::builtin("balrog").unwrap();
        assert_eq!(b.observation.image_size, 256);
        assert!(b.observation.reset_noop);
        assert_eq!((b.prompt.history, b.prompt.image_history), (16, 1));
        assert_eq!(b.parser.parser, ParserMode::Balrog);
        assert_eq!((b.episode.steps, b.episode.episode_length), (2000, 10_000));
        assert_eq!(b.sampling.temperature, Some(1.0));
        assert_eq!(b.sampling.max_tokens, Some(8192));
    }
}
