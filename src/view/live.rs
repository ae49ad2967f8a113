//! The live state of a run's episodes in flight as JSON (`/run/NAME/live.json`), from the tails
//! of their trajectories (`results::live::TrajectoryTail`, read incrementally and tolerantly),
//! and the inline script that polls it and draws one panel per episode with DOM text nodes
//! (model text is never parsed as HTML).

use std::path::Path;

use serde_json::{json, Value};

use crate::results::live::{seed_folders, TrajectoryTail};

use super::state::{in_progress, run_name, ViewState};

/// How often the page asks for the live state, milliseconds.
pub const LIVE_POLL_MS: u64 = 500;
/// Most episodes in flight shown (the lowest seeds).
pub const MAX_PANELS: usize = 32;

fn url_part(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The URL path of a run's page (`/run/NAME/`), its name percent-encoded.
pub fn run_url(dir: &Path) -> String {
    format!("/run/{}/", url_part(&run_name(dir)))
}

/// The live state of a run: whether it is in progress, its episode counts, and per unfinished
/// episode with a trajectory (at most [`MAX_PANELS`]): seed, turn, step, last reply, the last
/// turn's actions, reward and achievements so far, and the URL of the newest frame.
pub fn live_json(state: &ViewState, dir: &Path) -> Value {
    let (done, open) = seed_folders(dir);
    let mut episodes = Vec::new();
    let mut tails = state.tails.lock().unwrap_or_else(|p| p.into_inner());
    tails.retain(|(d, s), _| d != dir || open.contains(s));
    for &seed in open.iter().take(MAX_PANELS) {
        let tail = tails.entry((dir.to_path_buf(), seed)).or_default();
        if let Err(e) = tail.update(dir, seed) {
            tracing::debug!("live: {e}");
        }
        if tail.lines == 0 {
            continue;
        }
        episodes.push(episode_json(dir, seed, tail));
    }
    json!({
        "run": run_name(dir),
        "in_progress": in_progress(dir),
        "complete": done.len(),
        "unfinished": open.len(),
        "episodes": episodes,
    })
}

fn episode_json(dir: &Path, seed: i64, t: &TrajectoryTail) -> Value {
    let frame = t.frame.as_deref().and_then(|rel| {
        let file = rel.strip_prefix("frames/")?;
        Some(format!("{}frame/{seed}/{}", run_url(dir), url_part(file)))
    });
    json!({
        "seed": seed,
        "turn": t.turn,
        "step": t.step,
        "lines": t.lines,
        "skipped": t.skipped,
        "reply": t.last_reply,
        "actions": t.actions,
        "reward": t.reward,
        "achievements": t.achievements,
        "frame": frame,
    })
}

/// The live panel section and its script (inline; it talks only to this server).
pub fn live_section() -> String {
    format!(
        r#"<section id="live" data-poll-ms="{LIVE_POLL_MS}"><h2>Live <span class="small" id="live-status">connecting…</span></h2><div id="live-panels" class="live-panels"></div></section><script>{LIVE_SCRIPT}</script>"#
    )
}

/// Style of the live panels.
pub const LIVE_STYLE: &str = r#"
.live-panels{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:10px}
.live-panel{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px;display:flex;gap:10px}
.live-panel img{width:128px;height:128px;image-rendering:pixelated;border:1px solid var(--line);flex:none}
.live-panel .facts{font-size:12px;color:var(--muted)}
.live-panel .reply{white-space:pre-wrap;overflow-wrap:anywhere;max-height:120px;overflow:auto;font-size:12px;margin-top:4px}
"#;

/// Records script errors in the page (`data-script-error` on `<html>`) so a test reading the
/// DOM sees them; it runs before the live script.
pub const ERROR_HOOK: &str = r#"<script>window.addEventListener('error',function(e){document.documentElement.setAttribute('data-script-error',String(e.message||e))});window.addEventListener('unhandledrejection',function(e){document.documentElement.setAttribute('data-script-error','unhandled rejection: '+String(e.reason))});</script>"#;

const LIVE_SCRIPT: &str = r#"
(function(){
  var root=document.getElementById('live');
  var panels=document.getElementById('live-panels');
  var status=document.getElementById('live-status');
  var poll=parseInt(root.getAttribute('data-poll-ms'),10)||500;
  var seen={};
  function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;if(text!==undefined)e.textContent=text;return e;}
  function panel(ep){
    var id='live-seed-'+ep.seed;
    var p=document.getElementById(id);
    if(!p){
      p=el('div','live-panel');p.id=id;
      var img=el('img');img.alt='latest frame';p.appendChild(img);
      var body=el('div');
      body.appendChild(el('div','title'));body.appendChild(el('div','facts'));
      body.appendChild(el('div','facts ach'));body.appendChild(el('div','reply'));
      p.appendChild(body);panels.appendChild(p);
    }
    var turns=seen[ep.seed]||(seen[ep.seed]=[]);
    if(turns.indexOf(ep.turn)<0)turns.push(ep.turn);
    p.setAttribute('data-seed',String(ep.seed));
    p.setAttribute('data-turn',String(ep.turn));
    p.setAttribute('data-turns-seen',turns.join(','));
    var img=p.querySelector('img');
    if(ep.frame&&img.getAttribute('src')!==ep.frame)img.setAttribute('src',ep.frame);
    var parts=p.lastChild.children;
    parts[0].textContent='seed '+ep.seed+' · turn '+ep.turn+' · step '+ep.step;
    parts[1].textContent='reward so far '+Number(ep.reward).toFixed(1)+' · last actions: '+(ep.actions.length?ep.actions.join(', '):'none');
    parts[2].textContent='achievements so far: '+(ep.achievements.length?ep.achievements.join(', '):'none');
    parts[3].textContent=ep.reply;
  }
  function tick(){
    fetch('live.json',{cache:'no-store'}).then(function(r){
      if(!r.ok)throw new Error('live.json: HTTP '+r.status);
      return r.json();
    }).then(function(s){
      try{render(s);}catch(e){document.documentElement.setAttribute('data-script-error','live: '+e.message);throw e;}
      if(s.in_progress)setTimeout(tick,poll);
    }).catch(function(e){status.textContent='live view unreachable, retrying: '+e.message;setTimeout(tick,poll*4);});
  }
  function render(s){
      var ids={};
      s.episodes.forEach(function(ep){ids['live-seed-'+ep.seed]=1;panel(ep);});
      Array.prototype.slice.call(panels.children).forEach(function(c){if(!ids[c.id])panels.removeChild(c);});
      status.textContent=s.in_progress?(s.episodes.length+' episode(s) in flight · '+s.complete+' complete'):('finished · '+s.complete+' complete (reload for the full report)');
      document.documentElement.setAttribute('data-live-ok',String((parseInt(document.documentElement.getAttribute('data-live-ok')||'0',10))+1));
  }
  tick();
})();
"#;
