//! The local model (crates/local, `vlm_eval_local`) as a [`ChatModel`]: one loaded engine on a
//! worker thread serves every episode. Requests that arrive together are prefilled in one batch
//! and decoded in one batch (continuous batching: new arrivals join between decode steps). The
//! engine knows nothing of chat requests: this file turns them into its prompts and its
//! generations into replies (Qwen3.5's XML tool calls through `model::toolxml`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use vlm_eval_local::backend::Backend;
use vlm_eval_local::backend::DType;
use vlm_eval_local::device::{with_backend, Device, Thinking, WithBackend};
use vlm_eval_local::engine::{Engine, GenParams, Generation, Prompt, Sequence};
use vlm_eval_local::preprocess::preprocess_image;
use vlm_eval_local::sampling::SamplingParams;
use vlm_eval_local::tokenizer::python_json;
use vlm_eval_local::LocalError;

use crate::model::{
    BoxFuture, ChatModel, ChatReply, ChatRequest, Message, ModelError, Part, Role, ToolCall,
    ToolChoice, Usage,
};

/// How to load a local model.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// Checkpoint folder.
    pub dir: PathBuf,
    /// Device.
    pub device: Device,
    /// Precision (default: f32 on CPU, bf16 on CUDA).
    pub dtype: Option<DType>,
    /// Most sequences decoded together.
    pub max_batch: usize,
    /// The chat template's `enable_thinking`.
    pub thinking: Thinking,
}

/// Output tokens when a request sets no limit.
pub const DEFAULT_MAX_NEW_TOKENS: usize = 512;

struct Job {
    request: ChatRequest,
    accepted: Instant,
    reply: oneshot::Sender<Result<ChatReply, ModelError>>,
}

/// A local checkpoint served to concurrent episodes by one worker thread.
pub struct LocalModel {
    name: String,
    tx: mpsc::Sender<Job>,
}

impl LocalModel {
    /// Load the checkpoint and start the worker.
    pub fn load(name: String, opts: &LocalOptions) -> Result<LocalModel, LocalError> {
        struct Load<'a> {
            name: String,
            opts: &'a LocalOptions,
        }
        impl WithBackend for Load<'_> {
            type Output = LocalModel;
            fn run<B: Backend>(self, be: B) -> Result<LocalModel, LocalError> {
                let mut engine = Engine::load(&self.opts.dir, be)?;
                engine.tok.enable_thinking = Some(self.opts.thinking == Thinking::On);
                Ok(LocalModel::serve(
                    self.name,
                    engine,
                    self.opts.max_batch.max(1),
                ))
            }
        }
        with_backend(opts.device, opts.dtype, Load { name, opts })
    }

    /// Serve an already loaded engine.
    pub fn serve<B: Backend>(name: String, engine: Engine<B>, max_batch: usize) -> LocalModel {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("local-vlm".into())
            .spawn(move || worker(engine, rx, max_batch))
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the local model thread: {e}"));
        LocalModel { name, tx }
    }
}

impl ChatModel for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            let job = Job {
                request: request.clone(),
                accepted: Instant::now(),
                reply: tx,
            };
            self.tx
                .send(job)
                .map_err(|_| ModelError::Config("the local model thread has stopped".into()))?;
            rx.await
                .map_err(|_| ModelError::Config("the local model thread has stopped".into()))?
        })
    }
}

/// One request being generated.
struct Active<B: Backend> {
    seq: Sequence<B>,
    job: Job,
}

fn worker<B: Backend>(engine: Engine<B>, rx: mpsc::Receiver<Job>, max_batch: usize) {
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut active: Vec<Active<B>> = Vec::new();
    loop {
        if active.is_empty() && waiting.is_empty() {
            match rx.recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => return,
            }
        }
        while let Ok(job) = rx.try_recv() {
            waiting.push_back(job);
        }
        // Admit new requests up to the batch limit and prefill them together.
        let first_new = active.len();
        while active.len() < max_batch {
            let Some(job) = waiting.pop_front() else {
                break;
            };
            match build(&engine, &job.request).and_then(|(p, g)| engine.start(p, g)) {
                Ok(seq) => active.push(Active { seq, job }),
                Err(e) => {
                    let _ = job.reply.send(Err(ModelError::BadResponse(e.to_string())));
                }
            }
        }
        let result = {
            let mut refs: Vec<&mut Sequence<B>> =
                active[first_new..].iter_mut().map(|a| &mut a.seq).collect();
            engine.prefill(&mut refs)
        }
        .and_then(|_| {
            let mut refs: Vec<&mut Sequence<B>> =
                active[..first_new].iter_mut().map(|a| &mut a.seq).collect();
            engine.step(&mut refs)
        });
        if let Err(e) = result {
            tracing::error!("local model: {e}");
            for a in active.drain(..) {
                let _ = a
                    .job
                    .reply
                    .send(Err(ModelError::BadResponse(e.to_string())));
            }
            continue;
        }
        let mut i = 0;
        while i < active.len() {
            if active[i].seq.is_done() {
                let a = active.swap_remove(i);
                let g = engine.finish(a.seq);
                let _ = a
                    .job
                    .reply
                    .send(Ok(reply(engine.be.name(), &g, a.job.accepted)));
            } else {
                i += 1;
            }
        }
    }
}

/// The reply of a generation: thinking text as `reasoning`; Qwen3.5 XML tool calls
/// (`<tool_call><function=…>`) as tool calls, the text before them as the content.
fn reply(device: &str, g: &Generation, accepted: Instant) -> ChatReply {
    let (text, tool_calls) = match crate::model::toolxml::parse_xml_tool_calls(&g.text) {
        Some((content, calls)) => (content, calls),
        None => (g.text.clone(), Vec::new()),
    };
    ChatReply {
        text: Some(text),
        tool_calls,
        reasoning: g.reasoning.clone(),
        finish_reason: Some(g.finish_reason.to_string()),
        usage: Usage {
            input_tokens: Some(g.prompt_tokens as u64),
            output_tokens: Some(g.tokens.len() as u64),
            ..Usage::default()
        },
        latency_ms: accepted.elapsed().as_secs_f64() * 1e3,
        raw: json!({"local": {
            "device": device,
            "text": g.text,
            "reasoning": g.reasoning,
            "finish_reason": g.finish_reason,
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": g.tokens.len(),
            "ttft_ms": g.ttft_ms,
            "decode_tokens_per_s": g.decode_tokens_per_s,
            "decode_gb_per_s": g.decode_gb_per_s,
            "max_batch": g.max_batch,
        }}),
        ..ChatReply::default()
    }
}

/// Tool descriptions for templates that do not render tools themselves.
fn tools_in_system_prompt(tools: &Value) -> String {
    let mut s = String::from(
        "\n\n# Tools\n\nYou can call these functions. Each signature is a JSON object inside <tools></tools>:\n<tools>",
    );
    for t in tools.as_array().into_iter().flatten() {
        s.push('\n');
        s.push_str(&python_json(t, None));
    }
    s.push_str(
        "\n</tools>\n\nTo call one, reply with a JSON object holding the function name and its arguments \
         inside <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    s
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// HF chat messages, the tools list (when the template renders tools) and the PNG images.
pub fn hf_messages(
    req: &ChatRequest,
    template_has_tools: bool,
) -> (Value, Option<Value>, Vec<&[u8]>) {
    let offer_tools = !req.tools.is_empty() && req.tool_choice != Some(ToolChoice::None);
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
        .collect();
    let mut images = Vec::new();
    let mut msgs: Vec<Value> = Vec::new();
    let args_of = |c: &ToolCall| match &c.arguments {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    };
    // Past tool calls, as JSON text after the message's text (for templates without tools).
    let text_of = |m: &Message| {
        let mut t = m.joined_text();
        for c in &m.tool_calls {
            t.push_str(&format!(
                "\n<tool_call>\n{}\n</tool_call>",
                python_json(&json!({"name": c.name, "arguments": args_of(c)}), None)
            ));
        }
        t
    };
    for m in &req.messages {
        // A template that renders tools gets past calls as structured `tool_calls` (it writes
        // them in the model's own format, as Qwen3.5's XML), when every call's arguments are
        // an object.
        let args: Vec<Value> = m.tool_calls.iter().map(args_of).collect();
        let structured = template_has_tools
            && m.image_count() == 0
            && !args.is_empty()
            && args.iter().all(Value::is_object);
        if structured {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .zip(args)
                .map(|(c, a)| {
                    json!({"type": "function", "id": c.id,
                           "function": {"name": c.name, "arguments": a}})
                })
                .collect();
            msgs.push(
                json!({"role": role_name(m.role), "content": m.joined_text(), "tool_calls": calls}),
            );
            continue;
        }
        let content = if m.image_count() > 0 {
            let parts: Vec<Value> = m
                .content
                .iter()
                .map(|p| match p {
                    Part::Text(t) => json!({"type": "text", "text": t}),
                    Part::Png(bytes) => {
                        images.push(bytes.as_slice());
                        json!({"type": "image"})
                    }
                })
                .collect();
            Value::Array(parts)
        } else {
            Value::String(text_of(m))
        };
        msgs.push(json!({"role": role_name(m.role), "content": content}));
    }
    if offer_tools && !template_has_tools {
        let extra = tools_in_system_prompt(&Value::Array(tools.clone()));
        match msgs.first_mut() {
            Some(first) if first["role"] == "system" && first["content"].is_string() => {
                let c = format!("{}{extra}", first["content"].as_str().unwrap_or_default());
                first["content"] = Value::String(c);
            }
            _ => msgs.insert(0, json!({"role": "system", "content": format!("You are a helpful assistant.{extra}")})),
        }
    }
    let tools = (offer_tools && template_has_tools).then_some(Value::Array(tools));
    (Value::Array(msgs), tools, images)
}

/// Turn a chat request into a prompt and generation settings.
fn build<B: Backend>(
    engine: &Engine<B>,
    req: &ChatRequest,
) -> Result<(Prompt, GenParams), LocalError> {
    let (messages, tools, pngs) = hf_messages(req, engine.tok.template_has_tools);
    let images = pngs
        .into_iter()
        .map(|b| preprocess_image(b, &engine.pre))
        .collect::<Result<Vec<_>, _>>()?;
    let prompt = engine.prompt(&messages, tools.as_ref(), images)?;
    let gen = &engine.gen;
    let temperature = match req.temperature {
        Some(t) => t,
        None if gen.do_sample => gen.temperature.unwrap_or(1.0),
        None => 0.0,
    };
    // Seeded by the request seed and the prompt, so reruns repeat and turns differ.
    let mut seed = req.seed.unwrap_or(0) as u64 ^ 0xcbf2_9ce4_8422_2325;
    for &id in &prompt.ids {
        seed = (seed ^ id as u64).wrapping_mul(0x100_0000_01b3);
    }
    let params = GenParams {
        max_new_tokens: req
            .max_tokens
            .map_or(DEFAULT_MAX_NEW_TOKENS, |m| m.max(1) as usize),
        sampling: SamplingParams {
            temperature,
            top_p: gen.top_p.unwrap_or(1.0),
            top_k: gen.top_k.unwrap_or(0),
            seed,
        },
        stop_ids: engine.default_stop_ids(),
    };
    Ok((prompt, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_tool_calls_are_structured_only_for_templates_that_render_tools() {
        let mut said = Message::text(Role::Assistant, "Chop.");
        said.tool_calls.push(ToolCall {
            id: "call_1".into(),
            name: "interact_many".into(),
            arguments: Value::String(r#"{"actions": ["do"]}"#.into()),
        });
        let req = ChatRequest {
            messages: vec![Message::text(Role::User, "Play."), said],
            ..ChatRequest::default()
        };
        let (msgs, _, _) = hf_messages(&req, true);
        assert_eq!(msgs[1]["content"], "Chop.");
        assert_eq!(
            msgs[1]["tool_calls"][0]["function"],
            json!({"name": "interact_many", "arguments": {"actions": ["do"]}})
        );
        let (msgs, _, _) = hf_messages(&req, false);
        assert!(msgs[1].get("tool_calls").is_none());
        let text = msgs[1]["content"].as_str().unwrap();
        assert!(text.starts_with("Chop.\n<tool_call>\n{") && text.contains("interact_many"));
        // Arguments that are not an object stay text, since the template iterates their items.
        let mut req = req;
        req.messages[1].tool_calls[0].arguments = Value::String("not json".into());
        let (msgs, _, _) = hf_messages(&req, true);
        assert!(msgs[1].get("tool_calls").is_none());
        assert!(msgs[1]["content"].as_str().unwrap().contains("not json"));
    }

    #[test]
    fn reply_turns_xml_tool_calls_and_thinking_into_fields() {
        let g = Generation {
            tokens: vec![1, 2, 3],
            text: "Chop.\n\n<tool_call>\n<function=interact_many>\n<parameter=actions>\n[\"do\"]\n</parameter>\n</function>\n</tool_call>".into(),
            reasoning: Some("A tree is near.".into()),
            finish_reason: "stop",
            prompt_tokens: 10,
            ttft_ms: 1.0,
            decode_tokens_per_s: 1.0,
            decode_gb_per_s: 0.0,
            max_batch: 1,
        };
        let r = reply("cpu", &g, Instant::now());
        assert_eq!(r.text.as_deref(), Some("Chop."));
        assert_eq!(r.reasoning.as_deref(), Some("A tree is near."));
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "interact_many");
        assert_eq!(r.tool_calls[0].arguments, json!({"actions": ["do"]}));
        // The raw record keeps the whole text and the thinking (the trajectory shows both).
        assert_eq!(r.raw["local"]["reasoning"], "A tree is near.");
        assert!(r.raw["local"]["text"]
            .as_str()
            .unwrap()
            .contains("<function=interact_many>"));
    }
}
