//! `run`'s second step: the run record, what run.json holds about a resolved run (its
//! settings, prompt, tools, textures and BALROG's texts); the runner adds times and counts.

use serde_json::{json, Value};

use super::resolve::ResolvedRun;
use crate::agent::conversation::ConversationConfig;
use crate::cli::error::CliError;
use crate::crafter::trace::sha256_hex;
use crate::results::run::seeds_value;

/// The `run.json` content of a resolved run.
pub(super) fn run_record(rr: &ResolvedRun) -> Result<Value, CliError> {
    let (a, r) = (&rr.args, &rr.r);
    let conversation = &rr.conversation;
    let tools = offered_tools(conversation)?;
    let mut config = json!({
        "model": rr.model_name,
        "seeds": seeds_value(&rr.seeds),
        "steps": rr.turns,
        "episode_length": r.episode_length,
        "concurrency": rr.concurrency,
        "temperature": r.temperature,
        "max_tokens": r.max_tokens,
        "endpoint": if rr.builtin { Value::Null } else { Value::String(rr.base_url.clone()) },
        "image_size": rr.image_size,
        "modality": conversation.modality,
        "obs_format": r.obs_format,
        "history": conversation.history,
        "image_history": conversation.image_history,
        "protocol": conversation.protocol,
        "max_actions_per_turn": conversation.max_actions,
        "prices_usd_per_1m": rr.prices.as_ref().map(prices_key),
        "max_tokens_field": r.max_tokens_field,
        "tool_choice": r.tool_choice,
        "seed_param": a.seed_param,
        "header_names": rr.headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "image_detail": a.image_detail,
        "run_name": rr.run_name,
        "out": rr.out,
        "frames": a.frames.unwrap_or_default().as_str(),
        "history_layout": conversation.layout.as_str(),
        "reasoning_effort": a.reasoning_effort.map_or("default", |e| e.as_str()),
        "prompt_cache_key": rr.prompt_cache_key.is_some(),
    });
    if let (Some(obj), Value::Object(keys)) = (config.as_object_mut(), r.config_keys(r.play.parser))
    {
        obj.extend(keys);
    }
    if let Some(shard) = a.shard {
        config["shard"] = json!({"index": shard.index, "count": shard.count, "all_seeds": seeds_value(&rr.all_seeds)});
    }
    if rr.local_dir.is_some() {
        use vlm_eval_local::device::{default_dtype, Device};
        config["thinking"] = json!(a.thinking.unwrap_or_default().as_str());
        let device = a.device.unwrap_or(Device::Cpu);
        config["device"] = json!(device.name());
        config["dtype"] = json!(a.dtype.unwrap_or(default_dtype(device)).name());
    }
    let system = &rr.system;
    let mut run_info = json!({
        "vlm_eval_version": env!("CARGO_PKG_VERSION"),
        "git_commit": option_env!("VLM_EVAL_GIT_COMMIT"),
        "crafter_reference": "crafter 1.8.3 (creation-order balancing)",
        "config": config,
        "prompt_sha256": sha256_hex(system.as_bytes()),
        "system_prompt": system,
        "tools": tools,
        "textures": {"kind": rr.textures.kind(), "fingerprint": rr.textures.fingerprint()},
        "engine_parity": crate::crafter::ENGINE_PARITY,
    });
    if let Some(p) = &rr.prices {
        run_info["price"] = p.record();
    }
    if let Some(shard) = a.shard {
        run_info["shard_from"] = shard.origin_record();
    }
    if let Some(texts) = &r.play.balrog {
        run_info["balrog"] = texts.record(a.allow_balrog_drift);
        if rr.balrog_layout {
            // No system message: the instruction is BALROG's first user message.
            run_info["prompt_sha256"] = json!(texts.prompt_sha256());
            run_info["system_prompt"] = Value::Null;
        }
    }
    Ok(run_info)
}

/// The prices a rerun must keep to resume: input and output, and the cached, cache-write and
/// tier rates only where they differ from input (so a run priced by --price-in/--price-out
/// records what it did before those existed).
fn prices_key(p: &crate::model::prices::Price) -> Value {
    let r = &p.rates;
    let mut v = json!({"input": r.input, "output": r.output});
    if r.cached_input != r.input {
        v["cached_input"] = json!(r.cached_input);
    }
    if let Some(w) = r.cache_write {
        v["cache_write"] = json!(w);
    }
    if let Some((n, t)) = &p.above {
        v["above"] = json!({"prompt_tokens": n, "input": t.input, "cached_input": t.cached_input, "output": t.output});
    }
    v
}

/// The tools a run offers, as OpenAI `tools` JSON (recorded in run.json for the SFT export).
fn offered_tools(conversation: &ConversationConfig) -> Result<Value, CliError> {
    let request = crate::agent::conversation::Conversation::new(conversation.clone())
        .request(&crate::model::Message::text(crate::model::Role::User, ""));
    crate::model::openai::tools_json(&request.tools).map_err(|e| CliError {
        code: 1,
        message: e.to_string(),
    })
}
