//! Generation over a loaded checkpoint: preprocess → vision → merge into the prompt →
//! batched prefill → batched decode with per-sequence sampling; TTFT, tokens/s and achieved
//! weight bandwidth per sequence.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::backend::Backend;
use super::config::{GenerationConfig, ModelConfig, PreprocessorConfig};
use super::model::{Model, SeqCache, SeqChunk};
use super::preprocess::{mrope_positions, ImageInput};
use super::sampling::{argmax, Sampler, SamplingParams};
use super::tokenizer::ChatTokenizer;
use super::weights::Weights;
use super::LocalError;

/// Prompt rows ready for the decoder: inputs, M-RoPE positions per prompt, next position per prompt.
type PromptRows<Buf> = (Buf, Vec<[Vec<i64>; 3]>, Vec<i64>);

/// A loaded model on a backend.
pub struct Engine<B: Backend> {
    /// The backend.
    pub be: B,
    /// Checkpoint folder.
    pub dir: PathBuf,
    /// `config.json`.
    pub cfg: ModelConfig,
    /// `preprocessor_config.json`.
    pub pre: PreprocessorConfig,
    /// `generation_config.json`.
    pub gen: GenerationConfig,
    /// Tokenizer and chat template.
    pub tok: ChatTokenizer,
    model: Model<B>,
}

/// Token ids with their images (placeholders already expanded).
#[derive(Clone, Debug)]
pub struct Prompt {
    /// Prompt ids.
    pub ids: Vec<u32>,
    /// Images in placeholder order.
    pub images: Vec<ImageInput>,
}

/// Per-request generation settings.
#[derive(Clone, Debug)]
pub struct GenParams {
    /// Stop after this many new tokens.
    pub max_new_tokens: usize,
    /// Token choice.
    pub sampling: SamplingParams,
    /// Stop when one of these is produced (not included in the text).
    pub stop_ids: Vec<u32>,
}

/// A finished generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// New token ids (the stop id, if any, excluded).
    pub tokens: Vec<u32>,
    /// Decoded reply text (after the last `</think>`, when there is one).
    pub text: String,
    /// The thinking text before the last `</think>`, if the model produced one.
    pub reasoning: Option<String>,
    /// `stop` (a stop id) or `length`.
    pub finish_reason: &'static str,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Request accepted → first token, milliseconds.
    pub ttft_ms: f64,
    /// Decode rate after the first token.
    pub decode_tokens_per_s: f64,
    /// Decoder weight bytes read per second during this sequence's decode steps.
    pub decode_gb_per_s: f64,
    /// Sequences sharing the largest decode step this one took part in.
    pub max_batch: usize,
}

/// A sequence in flight.
pub struct Sequence<B: Backend> {
    prompt: Prompt,
    params: GenParams,
    sampler: Sampler,
    cache: SeqCache<B>,
    next_pos: i64,
    prefilled: bool,
    generated: Vec<u32>,
    finish: Option<&'static str>,
    started: Instant,
    ttft: Option<Duration>,
    decode_time: Duration,
    decode_steps: usize,
    max_batch: usize,
}

impl<B: Backend> Sequence<B> {
    /// Whether generation has ended.
    pub fn is_done(&self) -> bool {
        self.finish.is_some()
    }

    fn push(&mut self, tok: u32) {
        if self.params.stop_ids.contains(&tok) {
            self.finish = Some("stop");
            return;
        }
        self.generated.push(tok);
        if self.generated.len() >= self.params.max_new_tokens {
            self.finish = Some("length");
        }
    }
}

/// The products run while it lives compute prompt rows ([`Backend::set_prompt`]); once it
/// is dropped, the phase before it again (so guards may nest).
struct PromptPhase<'a, B: Backend> {
    be: &'a B,
    before: bool,
}

impl<'a, B: Backend> PromptPhase<'a, B> {
    fn new(be: &'a B) -> Self {
        let before = be.set_prompt(true);
        PromptPhase { be, before }
    }
}

impl<B: Backend> Drop for PromptPhase<'_, B> {
    fn drop(&mut self) {
        self.be.set_prompt(self.before);
    }
}

impl<B: Backend> Engine<B> {
    /// Load a checkpoint folder onto a backend.
    pub fn load(dir: &Path, be: B) -> Result<Engine<B>, LocalError> {
        if !dir.is_dir() {
            return Err(LocalError::File {
                file: dir.to_path_buf(),
                msg: "is not a folder (expected a checkpoint folder with config.json)".into(),
            });
        }
        let cfg = ModelConfig::load(dir)?;
        let pre = PreprocessorConfig::load(dir, &cfg)?;
        let gen = GenerationConfig::load(dir)?;
        let tok = ChatTokenizer::load(dir, cfg.image_token_id)?;
        Engine::assemble(dir, be, cfg, pre, gen, tok)
    }

    /// Load a checkpoint folder that may hold only weights (`save_pretrained` output:
    /// config.json, generation_config.json, safetensors). Without `tokenizer.json` the engine
    /// works on token ids only (text → an error naming tokenizer.json); without
    /// `preprocessor_config.json` images use the family's processor defaults. A full
    /// checkpoint loads as with [`Engine::load`].
    pub fn load_bare(dir: &Path, be: B) -> Result<Engine<B>, LocalError> {
        if !dir.is_dir() {
            return Err(LocalError::File {
                file: dir.to_path_buf(),
                msg: "is not a folder (expected a checkpoint folder with config.json)".into(),
            });
        }
        let cfg = ModelConfig::load(dir)?;
        let pre = PreprocessorConfig::load_or_default(dir, &cfg)?;
        let gen = GenerationConfig::load(dir)?;
        let tok = if dir.join("tokenizer.json").exists() {
            ChatTokenizer::load(dir, cfg.image_token_id)?
        } else {
            tracing::info!(
                "{}: no tokenizer.json; working on token ids only",
                dir.display()
            );
            ChatTokenizer::ids_only(dir, cfg.text.vocab_size, cfg.image_token_id)
        };
        Engine::assemble(dir, be, cfg, pre, gen, tok)
    }

    /// Load the weights for already-read configuration.
    fn assemble(
        dir: &Path,
        be: B,
        cfg: ModelConfig,
        pre: PreprocessorConfig,
        gen: GenerationConfig,
        tok: ChatTokenizer,
    ) -> Result<Engine<B>, LocalError> {
        let weights = Weights::open_dir(dir)?;
        let model = Model::load(&be, &weights, &cfg)?;
        Ok(Engine {
            be,
            dir: dir.to_path_buf(),
            cfg,
            pre,
            gen,
            tok,
            model,
        })
    }

    /// Decoder weight bytes read per decode step (every decoder parameter once, lm_head
    /// included, at the backend's storage width).
    pub fn decode_weight_bytes(&self) -> usize {
        self.model.decode_params() * self.be.weight_bytes_per_value()
    }

    /// Ids that may be produced: the tokenizer's size (or config.json's vocab_size when
    /// ids-only), never more than the embedding rows.
    pub fn vocab_len(&self) -> usize {
        self.tok.vocab_len.min(self.cfg.text.vocab_size)
    }

    /// Stop ids: generation_config.json, else config.json, else the ChatML end tokens.
    pub fn default_stop_ids(&self) -> Vec<u32> {
        let mut ids = self.gen.eos_token_ids.clone();
        if ids.is_empty() {
            ids = self.cfg.eos_token_ids.clone();
        }
        for t in &self.tok.default_stop_ids {
            if !ids.contains(t) {
                ids.push(*t);
            }
        }
        ids
    }

    /// Render HF-style messages (and tools) and tokenize with image placeholders expanded.
    pub fn prompt(
        &self,
        messages: &Value,
        tools: Option<&Value>,
        images: Vec<ImageInput>,
    ) -> Result<Prompt, LocalError> {
        let text = self.tok.render(messages, tools)?;
        let m = self.cfg.vision.spatial_merge_size;
        let counts: Vec<usize> = images.iter().map(|i| i.merged_tokens(m)).collect();
        let ids = self.tok.encode_prompt(&text, &counts)?;
        Ok(Prompt { ids, images })
    }

    /// Merged image embeddings `[Σ tokens, hidden]` (host copy).
    pub fn image_embeds(&self, images: &[&ImageInput]) -> Result<Vec<f32>, LocalError> {
        let _prompt = PromptPhase::new(&self.be);
        let e = self.model.vision(&self.be, images)?;
        self.be.download(&e)
    }

    /// Accept a prompt: allocate its cache (prompt + max new tokens).
    pub fn start(&self, prompt: Prompt, params: GenParams) -> Result<Sequence<B>, LocalError> {
        let cache = self
            .model
            .new_cache(&self.be, prompt.ids.len() + params.max_new_tokens + 1)?;
        Ok(Sequence {
            sampler: Sampler::new(params.sampling),
            prompt,
            params,
            cache,
            next_pos: 0,
            prefilled: false,
            generated: Vec::new(),
            finish: None,
            started: Instant::now(),
            ttft: None,
            decode_time: Duration::ZERO,
            decode_steps: 0,
            max_batch: 0,
        })
    }

    /// Input rows for prompts: embeddings with image rows replaced by vision outputs.
    fn prompt_rows(&self, prompts: &[&Prompt]) -> Result<PromptRows<B::Buf>, LocalError> {
        let d = self.cfg.text.hidden_size;
        let all_ids: Vec<u32> = prompts.iter().flat_map(|p| p.ids.iter().copied()).collect();
        let mut x = self.model.embed(&self.be, &all_ids)?;
        let images: Vec<&ImageInput> = prompts.iter().flat_map(|p| p.images.iter()).collect();
        let mut positions = Vec::new();
        let mut next = Vec::new();
        for p in prompts {
            let grids: Vec<[usize; 3]> = p.images.iter().map(|i| i.grid).collect();
            let (pos, delta) = mrope_positions(
                &p.ids,
                &grids,
                self.cfg.image_token_id,
                self.cfg.vision.spatial_merge_size,
            )?;
            positions.push(pos);
            next.push(p.ids.len() as i64 + delta);
        }
        if !images.is_empty() {
            let emb = self.model.vision(&self.be, &images)?;
            let mut e = 0;
            for (r, &id) in all_ids.iter().enumerate() {
                if id == self.cfg.image_token_id {
                    self.be.copy_rows(&mut x, r, &emb, e, 1, d)?;
                    e += 1;
                }
            }
        }
        Ok((x, positions, next))
    }

    /// Prefill logits for every prompt row `[S, vocab]` (a fresh cache; for checks).
    pub fn prefill_logits(&self, prompt: &Prompt) -> Result<Vec<f32>, LocalError> {
        let _prompt = PromptPhase::new(&self.be);
        let (x, mut pos, _) = self.prompt_rows(&[prompt])?;
        let mut cache = self.model.new_cache(&self.be, prompt.ids.len())?;
        let mut chunk = [SeqChunk {
            cache: &mut cache,
            positions: pos.remove(0),
            all_logits: true,
        }];
        self.model.forward(&self.be, x, &mut chunk)
    }

    /// Logits `[vocab]` of one decode step with the cache: prefill `prompt`, then feed `token`
    /// (for checks against a reference's cached decode step).
    pub fn decode_step_logits(&self, prompt: &Prompt, token: u32) -> Result<Vec<f32>, LocalError> {
        let mut cache = self.model.new_cache(&self.be, prompt.ids.len() + 1)?;
        let next = {
            let _prompt = PromptPhase::new(&self.be);
            let (x, mut pos, next) = self.prompt_rows(&[prompt])?;
            let mut chunk = [SeqChunk {
                cache: &mut cache,
                positions: pos.remove(0),
                all_logits: false,
            }];
            self.model.forward(&self.be, x, &mut chunk)?;
            next
        };
        let x = self.model.embed(&self.be, &[token])?;
        let p = next[0];
        let mut chunk = [SeqChunk {
            cache: &mut cache,
            positions: [vec![p], vec![p], vec![p]],
            all_logits: false,
        }];
        self.model.forward(&self.be, x, &mut chunk)
    }

    /// Greedy tokens recomputing the whole sequence each step (no KV cache reuse; for checks).
    pub fn greedy_without_cache(&self, prompt: &Prompt, n: usize) -> Result<Vec<u32>, LocalError> {
        let mut p = prompt.clone();
        let v = self.cfg.text.vocab_size;
        let mut out = Vec::new();
        for _ in 0..n {
            let logits = self.prefill_logits(&p)?;
            let last = &logits[logits.len() - v..];
            let t = argmax(&last[..self.tok.vocab_len.min(v)]) as u32;
            out.push(t);
            p.ids.push(t);
        }
        Ok(out)
    }

    /// Prefill every not-yet-prefilled sequence in one batched pass and sample its first token.
    pub fn prefill(&self, seqs: &mut [&mut Sequence<B>]) -> Result<(), LocalError> {
        let mut todo: Vec<&mut Sequence<B>> = seqs
            .iter_mut()
            .filter(|s| !s.prefilled)
            .map(|s| &mut **s)
            .collect();
        if todo.is_empty() {
            return Ok(());
        }
        let prompts: Vec<&Prompt> = todo.iter().map(|s| &s.prompt).collect();
        let _prompt = PromptPhase::new(&self.be);
        let (x, positions, next) = self.prompt_rows(&prompts)?;
        let logits = {
            let mut chunks: Vec<SeqChunk<'_, B>> = todo
                .iter_mut()
                .zip(positions)
                .map(|(s, positions)| SeqChunk {
                    cache: &mut s.cache,
                    positions,
                    all_logits: false,
                })
                .collect();
            self.model.forward(&self.be, x, &mut chunks)?
        };
        let v = self.cfg.text.vocab_size;
        for (i, s) in todo.iter_mut().enumerate() {
            s.prefilled = true;
            s.next_pos = next[i];
            let t = s
                .sampler
                .sample(&logits[i * v..(i + 1) * v], self.tok.vocab_len);
            s.ttft = Some(s.started.elapsed());
            s.push(t);
        }
        Ok(())
    }

    /// One decode step for every prefilled, unfinished sequence (one batched pass).
    pub fn step(&self, seqs: &mut [&mut Sequence<B>]) -> Result<(), LocalError> {
        let mut active: Vec<&mut Sequence<B>> = seqs
            .iter_mut()
            .filter(|s| s.prefilled && !s.is_done())
            .map(|s| &mut **s)
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        let t0 = Instant::now();
        let ids: Vec<u32> = active
            .iter()
            .map(|s| *s.generated.last().unwrap_or(&0))
            .collect();
        let x = self.model.embed(&self.be, &ids)?;
        let logits = {
            let mut chunks: Vec<SeqChunk<'_, B>> = active
                .iter_mut()
                .map(|s| SeqChunk {
                    positions: [vec![s.next_pos], vec![s.next_pos], vec![s.next_pos]],
                    cache: &mut s.cache,
                    all_logits: false,
                })
                .collect();
            self.model.forward(&self.be, x, &mut chunks)?
        };
        let dt = t0.elapsed();
        let v = self.cfg.text.vocab_size;
        let n = active.len();
        for (i, s) in active.iter_mut().enumerate() {
            s.next_pos += 1;
            s.decode_time += dt;
            s.decode_steps += 1;
            s.max_batch = s.max_batch.max(n);
            let t = s
                .sampler
                .sample(&logits[i * v..(i + 1) * v], self.tok.vocab_len);
            s.push(t);
        }
        Ok(())
    }

    /// Summarise a finished (or abandoned) sequence.
    pub fn finish(&self, s: Sequence<B>) -> Generation {
        let secs = s.decode_time.as_secs_f64();
        let bytes = (self.model.decode_params() * self.be.weight_bytes_per_value()) as f64;
        let (reasoning, text) = self.tok.split_thinking(&s.generated);
        Generation {
            text,
            reasoning,
            prompt_tokens: s.prompt.ids.len(),
            finish_reason: s.finish.unwrap_or("length"),
            ttft_ms: s.ttft.map_or(0.0, |d| d.as_secs_f64() * 1e3),
            decode_tokens_per_s: if secs > 0.0 {
                s.decode_steps as f64 / secs
            } else {
                0.0
            },
            decode_gb_per_s: if secs > 0.0 {
                bytes * s.decode_steps as f64 / secs / 1e9
            } else {
                0.0
            },
            max_batch: s.max_batch,
            tokens: s.generated,
        }
    }

    /// Generate for several prompts together (batched prefill and decode) until all finish.
    pub fn generate_batch(
        &self,
        work: Vec<(Prompt, GenParams)>,
    ) -> Result<Vec<Generation>, LocalError> {
        let mut seqs = work
            .into_iter()
            .map(|(p, g)| self.start(p, g))
            .collect::<Result<Vec<_>, _>>()?;
        {
            let mut refs: Vec<&mut Sequence<B>> = seqs.iter_mut().collect();
            self.prefill(&mut refs)?;
            while refs.iter().any(|s| !s.is_done()) {
                self.step(&mut refs)?;
            }
        }
        Ok(seqs.into_iter().map(|s| self.finish(s)).collect())
    }

    /// Generate for one prompt.
    pub fn generate(&self, prompt: Prompt, params: GenParams) -> Result<Generation, LocalError> {
        let mut out = self.generate_batch(vec![(prompt, params)])?;
        out.pop()
            .ok_or_else(|| LocalError::Internal("no generation".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::PromptPhase;
    use crate::backend::cpu::packed::CpuPacked;
    use crate::backend::Backend;

    #[test]
    fn prompt_phase_guards_nest_and_restore_the_phase_before_them() {
        let be = CpuPacked::new(false);
        {
            let _outer = PromptPhase::new(&be);
            {
                let _inner = PromptPhase::new(&be);
            }
            // Still a prompt after the inner guard: setting it again reports a prompt.
            assert!(
                be.set_prompt(true),
                "the inner guard ended the outer one's prompt"
            );
        }
        // Decode again after the outer one.
        assert!(
            !be.set_prompt(false),
            "the outer guard left the prompt phase on"
        );
    }
}
