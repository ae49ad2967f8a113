//! A scripted policy that reads BALROG's observation text (the `Current Observation:` message
//! of the `balrog` preset) and answers in BALROG's format: one action name and nothing else.
//! It is the offline model of `--preset balrog` (`--model mock` or `scripted`): simple and
//! deterministic (the same text gives the same action), not strong.
//!
//! Priorities: act on what is in front (a tree, a cow, a zombie or skeleton, water when
//! thirsty, stone, coal or iron with the right pickaxe); make a wood pickaxe or sword next to a
//! table; place a table with wood in hand; walk toward the nearest tree while short of wood,
//! else toward water when thirsty, else toward stone; otherwise wander in a direction chosen
//! from the text's hash.

use super::{
    chat_reply, fnv1a, last_user_text, BoxFuture, ChatModel, ChatReply, ChatRequest, ModelError,
};
use crate::crafter::rules::Action;

/// What the policy reads from the text.
#[derive(Debug, Default)]
struct Seen<'a> {
    front: &'a str,
    /// (kind, distance, compass words) of the nearest thing of each kind.
    things: Vec<(&'a str, u32, &'a str)>,
    /// (item, count) for vitals (`n/9`) and inventory lines.
    items: Vec<(&'a str, i32)>,
}

impl<'a> Seen<'a> {
    fn read(text: &'a str) -> Seen<'a> {
        let mut s = Seen::default();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line
                .strip_prefix("You face ")
                .and_then(|r| r.strip_suffix(" at your front."))
            {
                s.front = rest;
            } else if let Some(rest) = line.strip_prefix("- ") {
                if let Some((name, count)) = rest.split_once(": ") {
                    let n = count.split('/').next().unwrap_or("0").trim();
                    s.items.push((name, n.parse().unwrap_or(0)));
                } else if let Some((head, dir)) = rest.split_once(" to your ") {
                    let mut words = head.rsplitn(3, ' ');
                    let (_, d, name) = (words.next(), words.next(), words.next());
                    if let (Some(d), Some(name)) = (d, name) {
                        s.things.push((name, d.parse().unwrap_or(99), dir));
                    }
                }
            }
        }
        s
    }

    fn count(&self, item: &str) -> i32 {
        self.items
            .iter()
            .find(|(n, _)| *n == item)
            .map_or(0, |(_, c)| *c)
    }

    fn nearest(&self, kind: &str) -> Option<(u32, &'a str)> {
        self.things
            .iter()
            .find(|(n, _, _)| *n == kind)
            .map(|(_, d, dir)| (*d, *dir))
    }
}

/// A move toward a compass direction ("north-west" alternates its two words by `salt`).
fn toward(dir: &str, salt: u64) -> Action {
    let words: Vec<&str> = dir.split('-').collect();
    let word = words[(salt as usize) % words.len().max(1)];
    match word {
        "north" => Action::MoveUp,
        "south" => Action::MoveDown,
        "west" => Action::MoveLeft,
        _ => Action::MoveRight,
    }
}

/// The policy's action for a BALROG observation text.
pub fn balrog_action(text: &str) -> Action {
    let s = Seen::read(text);
    let hash = fnv1a(text.as_bytes());
    let has = |item: &str| s.count(item) > 0;
    let act_on_front = match s.front {
        "tree" | "cow" | "zombie" | "skeleton" => true,
        "water" => s.count("drink") < 9,
        "stone" | "coal" => has("wood_pickaxe"),
        "iron" => has("stone_pickaxe"),
        _ => false,
    };
    if act_on_front {
        return Action::Do;
    }
    let table_near = s.nearest("table").is_some_and(|(d, _)| d <= 1);
    if table_near && has("wood") {
        if !has("wood_pickaxe") {
            return Action::MakeWoodPickaxe;
        }
        if !has("wood_sword") {
            return Action::MakeWoodSword;
        }
        if has("stone") && !has("stone_pickaxe") {
            return Action::MakeStonePickaxe;
        }
    }
    if s.nearest("table").is_none() && s.count("wood") >= 2 && s.front == "grass" {
        return Action::PlaceTable;
    }
    let goal = if s.count("wood") < 4 {
        "tree"
    } else if s.count("drink") < 5 {
        "water"
    } else {
        "stone"
    };
    if let Some((_, dir)) = s.nearest(goal).or_else(|| s.nearest("tree")) {
        return toward(dir, hash >> 7);
    }
    // Wander: a heading that changes with the text.
    [
        Action::MoveLeft,
        Action::MoveRight,
        Action::MoveUp,
        Action::MoveDown,
    ][(hash % 4) as usize]
}

/// [`balrog_action`] as a chat model: the reply is the action's display name alone.
pub struct BalrogScriptedModel;

impl ChatModel for BalrogScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatReply, ModelError>> {
        Box::pin(async move {
            let text = last_user_text(request);
            let action = balrog_action(&text);
            let hash = fnv1a(text.as_bytes());
            Ok(chat_reply(
                Some(action.display_name().to_string()),
                Vec::new(),
                "stop",
                self.name(),
                hash,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBS: &str = "Current Observation:
Your status:
- health: 9/9
- food: 9/9
- drink: 3/9
- energy: 9/9

Your inventory:
- wood: 5
You see:
- tree 7 steps to your north-west
- water 3 steps to your east
- grass 1 step to your west

You face grass at your front.
Image observation provided.";

    #[test]
    fn reads_balrog_text_and_answers_a_display_name() {
        let s = Seen::read(OBS);
        assert_eq!(s.front, "grass");
        assert_eq!(s.count("wood"), 5);
        assert_eq!(s.count("drink"), 3);
        assert_eq!(s.nearest("tree"), Some((7, "north-west")));
        // Thirsty with wood: toward the water, east; no table seen and wood ≥ 2: place one.
        assert_eq!(balrog_action(OBS), Action::PlaceTable);
        let facing_tree = OBS.replace("You face grass", "You face tree");
        assert_eq!(balrog_action(&facing_tree), Action::Do);
        let with_table = OBS.replace("- grass 1 step", "- table 1 step");
        assert_eq!(balrog_action(&with_table), Action::MakeWoodPickaxe);
        let walk = OBS.replace("- wood: 5", "- wood: 1");
        assert!(matches!(
            balrog_action(&walk),
            Action::MoveUp | Action::MoveLeft
        ));
        let r = futures::executor::block_on(BalrogScriptedModel.chat(&ChatRequest {
            messages: vec![crate::model::Message::text(crate::model::Role::User, OBS)],
            ..ChatRequest::default()
        }))
        .unwrap();
        assert_eq!(r.text.as_deref(), Some("Place Table"));
        assert!(r.tool_calls.is_empty());
    }
}
