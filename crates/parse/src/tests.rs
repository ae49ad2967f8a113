//! Tests of the reply parser.

use super::lenient::Lenient;
use super::names::*;
use super::toolcall::*;
use super::*;
use crate::{ReplyBuf, ToolCall};
use serde_json::json;
use Action::*;

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments,
    }
}

fn tool_reply(calls: Vec<ToolCall>) -> ReplyBuf {
    ReplyBuf {
        tool_calls: calls,
        ..Default::default()
    }
}

fn text_reply(text: &str) -> ReplyBuf {
    ReplyBuf {
        text: Some(text.into()),
        ..Default::default()
    }
}

fn tool(text: &str) -> Parsed {
    parse_reply(&text_reply(text), Protocol::Tool, 8)
}

fn textp(text: &str) -> Parsed {
    parse_reply(&text_reply(text), Protocol::Text, 8)
}

fn args(s: &str) -> Parsed {
    parse_reply(
        &tool_reply(vec![call("interact_many", Value::String(s.into()))]),
        Protocol::Tool,
        8,
    )
}

// ---- normalize_action ----

#[test]
fn normalize_canonical_names() {
    for a in Action::ALL {
        assert_eq!(normalize_action(a.name()), Some(a), "{}", a.name());
    }
}

#[test]
fn normalize_display_names() {
    for a in Action::ALL {
        let d = display_name(a);
        assert_eq!(normalize_action(d), Some(a), "{d}");
        assert_eq!(normalize_action(&d.to_uppercase()), Some(a), "{d}");
        assert_eq!(normalize_action(&d.to_lowercase()), Some(a), "{d}");
    }
}

#[test]
fn normalize_numeric_ids() {
    for a in Action::ALL {
        assert_eq!(normalize_action(&a.id().to_string()), Some(a));
    }
    assert_eq!(normalize_action(" 5 "), Some(Do));
    assert_eq!(normalize_action("\"3\""), Some(MoveUp));
    assert_eq!(normalize_action("[7]"), Some(PlaceStone));
    assert_eq!(normalize_action("action 3"), Some(MoveUp));
    assert_eq!(normalize_action("17"), None);
    assert_eq!(normalize_action("-1"), None);
    assert_eq!(normalize_action("99999999999999999999999"), None);
}

#[test]
fn normalize_case_and_separator_variants() {
    for s in [
        "Move-Left",
        "move left",
        "MOVE_LEFT",
        "MoveLeft",
        "moveLeft",
        "moveleft",
        "  move_left  ",
        "`move_left`",
        "'move_left'",
        "\"move_left\"",
        "**move_left**",
        "move_left.",
        "(move_left)",
        "<move_left>",
        "“move_left”",
        "move__left",
        "move.left",
    ] {
        assert_eq!(normalize_action(s), Some(MoveLeft), "{s}");
    }
    assert_eq!(normalize_action("Make-Wood-Pickaxe"), Some(MakeWoodPickaxe));
    assert_eq!(normalize_action("PlaceTable"), Some(PlaceTable));
    assert_eq!(normalize_action("NOOP"), Some(Noop));
    assert_eq!(normalize_action("noOp"), Some(Noop));
}

#[test]
fn normalize_direction_aliases() {
    let cases = [
        ("left", MoveLeft),
        ("West", MoveLeft),
        ("go west", MoveLeft),
        ("walk left", MoveLeft),
        ("westward", MoveLeft),
        ("right", MoveRight),
        ("east", MoveRight),
        ("Move East", MoveRight),
        ("turn right", MoveRight),
        ("up", MoveUp),
        ("north", MoveUp),
        ("go up", MoveUp),
        ("northwards", MoveUp),
        ("down", MoveDown),
        ("SOUTH", MoveDown),
        ("head south", MoveDown),
        ("face down", MoveDown),
        ("←", MoveLeft),
        ("→", MoveRight),
        ("↑", MoveUp),
        ("↓", MoveDown),
        ("⬅️", MoveLeft),
        ("move one step to the left", MoveLeft),
        ("move to the west", MoveLeft),
        ("step left", MoveLeft),
    ];
    for (s, a) in cases {
        assert_eq!(normalize_action(s), Some(a), "{s}");
    }
}

#[test]
fn normalize_do_sleep_noop_aliases() {
    for s in [
        "interact",
        "collect",
        "attack",
        "use",
        "hit",
        "mine",
        "chop",
        "Interact",
        "do it",
        "collect_wood",
        "collect wood",
        "eat_cow",
        "defeat_zombie",
        "drink water",
        "collect_drink",
        "chop tree",
        "interact with tree",
        "pick up",
        "attack the zombie",
    ] {
        assert_eq!(normalize_action(s), Some(Do), "{s}");
    }
    for s in [
        "wait",
        "nothing",
        "none",
        "no-op",
        "NOP",
        "do nothing",
        "idle",
        "stay",
    ] {
        assert_eq!(normalize_action(s), Some(Noop), "{s}");
    }
    for s in ["rest", "Sleep", "go to sleep", "nap"] {
        assert_eq!(normalize_action(s), Some(Sleep), "{s}");
    }
}

#[test]
fn normalize_place_and_make_aliases() {
    let cases = [
        ("place crafting table", PlaceTable),
        ("build table", PlaceTable),
        ("craft table", PlaceTable),
        ("make a table", PlaceTable),
        ("place workbench", PlaceTable),
        ("put stone", PlaceStone),
        ("place rock", PlaceStone),
        ("build furnace", PlaceFurnace),
        ("make furnace", PlaceFurnace),
        ("plant", PlacePlant),
        ("plant sapling", PlacePlant),
        ("plant a sapling", PlacePlant),
        ("place sapling", PlacePlant),
        ("craft wood pickaxe", MakeWoodPickaxe),
        ("wood pickaxe", MakeWoodPickaxe),
        ("make wooden pickaxe", MakeWoodPickaxe),
        ("craft a wooden pick-axe", MakeWoodPickaxe),
        ("craft_wood_pickaxe", MakeWoodPickaxe),
        ("stone pickaxe", MakeStonePickaxe),
        ("make iron pick", MakeIronPickaxe),
        ("forge iron sword", MakeIronSword),
        ("wooden sword", MakeWoodSword),
        ("Craft Stone Sword", MakeStoneSword),
        ("makeIronSword", MakeIronSword),
    ];
    for (s, a) in cases {
        assert_eq!(normalize_action(s), Some(a), "{s}");
    }
}

#[test]
fn normalize_rejects_ambiguous_and_garbage() {
    for s in [
        "",
        "   ",
        "a",
        "w",
        "s",
        "d",
        "table",
        "stone",
        "wood",
        "pickaxe",
        "move",
        "place",
        "make",
        "go",
        "jump",
        "fly north-east",
        "use table",
        "make stone",
        "craft diamond",
        "left right",
        "wake_up",
        "I will move left",
        "🙂",
        "ⅰⅱ",
        "->",
        "gold pickaxe",
    ] {
        assert_eq!(normalize_action(s), None, "{s:?}");
    }
    let long = "move_left ".repeat(50);
    assert_eq!(normalize_action(&long), None);
}

// ---- tool calls ----

#[test]
fn tool_call_string_arguments() {
    let r = tool_reply(vec![call(
        "interact_many",
        json!(r#"{"actions": ["move_left", "do"], "reasoning": "tree west"}"#),
    )]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    assert_eq!(p.source, ParseSource::ToolCall);
    assert_eq!(p.reasoning.as_deref(), Some("tree west"));
    assert!(p.unknown.is_empty());
    assert_eq!(p.truncated, 0);
}

#[test]
fn tool_call_object_arguments() {
    let r = tool_reply(vec![call("interact_many", json!({"actions": ["noop"]}))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![Noop]);
    assert_eq!(p.source, ParseSource::ToolCall);
}

#[test]
fn tool_call_fenced_arguments() {
    let p = args("```json\n{\"actions\": [\"move_up\", \"move_up\"]}\n```");
    assert_eq!(p.actions, vec![MoveUp, MoveUp]);
    let p = args("```{\"actions\": [\"sleep\"]}```");
    assert_eq!(p.actions, vec![Sleep]);
}

#[test]
fn tool_call_trailing_commas() {
    let p = args(r#"{"actions": ["move_left", "do",],}"#);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
}

#[test]
fn tool_call_single_quotes() {
    let p = args(r#"{'actions': ['move_right', 'do'], 'reasoning': 'cow east'}"#);
    assert_eq!(p.actions, vec![MoveRight, Do]);
    assert_eq!(p.reasoning.as_deref(), Some("cow east"));
}

#[test]
fn tool_call_truncated_arguments() {
    for s in [
        r#"{"actions": ["move_left", "do"]"#,
        r#"{"actions": ["move_left", "do""#,
        r#"{"actions": ["move_left", "do"#,
        r#"{"actions": ["move_left", "do", "#,
        r#"{"reasoning": "go", "actions": ["move_left", "do"],"#,
    ] {
        let p = args(s);
        assert_eq!(p.actions, vec![MoveLeft, Do], "{s}");
    }
}

#[test]
fn tool_call_unquoted_and_missing_commas() {
    // "move_left do" is one bare word, and not an action.
    let p = args(r#"{actions: [move_left do]}"#);
    assert!(p.actions.is_empty());
    assert_eq!(p.unknown, vec!["move_left do"]);
    let p = args(r#"{actions: [move_left, do]}"#);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    let p = args(r#"{"actions" ["move_left" "do"]}"#);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
}

#[test]
fn tool_call_action_shapes() {
    let cases: Vec<(Value, Vec<Action>)> = vec![
        (json!({"actions": "move_left"}), vec![MoveLeft]),
        (
            json!({"actions": "move_left, move_left, do"}),
            vec![MoveLeft, MoveLeft, Do],
        ),
        (json!({"actions": "move_left then do"}), vec![MoveLeft, Do]),
        (
            json!({"actions": [{"action": "move_left"}, {"action": "do"}]}),
            vec![MoveLeft, Do],
        ),
        (json!({"actions": [{"name": "sleep"}]}), vec![Sleep]),
        (json!({"actions": [1, 5]}), vec![MoveLeft, Do]),
        (
            json!({"actions": ["1", "Move West", "DO"]}),
            vec![MoveLeft, MoveLeft, Do],
        ),
        (json!({"action": "place_table"}), vec![PlaceTable]),
        (json!({"commands": ["move_down"]}), vec![MoveDown]),
        (
            json!({"actions_list": ["make_wood_pickaxe"]}),
            vec![MakeWoodPickaxe],
        ),
        (json!({"Actions": ["noop"]}), vec![Noop]),
        (
            json!({"actions": "[\"move_up\", \"do\"]"}),
            vec![MoveUp, Do],
        ),
        (json!({"actions": [["move_up"], ["do"]]}), vec![MoveUp, Do]),
    ];
    for (v, want) in cases {
        let r = tool_reply(vec![call("interact_many", v.clone())]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, want, "{v}");
    }
}

#[test]
fn tool_call_unknown_actions_reported() {
    let r = tool_reply(vec![call(
        "interact_many",
        json!({"actions": ["move_left", "jump", "fly", "do", 42]}),
    )]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    assert_eq!(p.unknown, vec!["jump", "fly", "42"]);
}

#[test]
fn tool_call_max_actions_truncates() {
    let r = tool_reply(vec![call(
        "interact_many",
        json!({"actions": vec!["move_left"; 20]}),
    )]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![MoveLeft; 8]);
    assert_eq!(p.truncated, 12);
    let p = parse_reply(&r, Protocol::Tool, 0);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.truncated, 19);
}

#[test]
fn tool_call_multiple_calls_concatenate() {
    let r = tool_reply(vec![
        call(
            "interact_many",
            json!({"actions": ["move_left"], "reasoning": "first"}),
        ),
        call(
            "interact_many",
            json!({"actions": ["do"], "reasoning": "second"}),
        ),
    ]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    assert_eq!(p.reasoning.as_deref(), Some("first"));
    let p = parse_reply(&r, Protocol::Tool, 1);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.truncated, 1);
}

#[test]
fn tool_call_similar_names_and_foreign_calls() {
    for name in [
        "interact",
        "crafter_interact",
        "take_action",
        "functions.interact_many",
    ] {
        let r = tool_reply(vec![call(name, json!({"actions_list": ["do"]}))]);
        assert_eq!(
            parse_reply(&r, Protocol::Tool, 8).actions,
            vec![Do],
            "{name}"
        );
    }
    // Foreign name but an actions argument: accepted.
    let r = tool_reply(vec![call("whatever", json!({"actions": ["sleep"]}))]);
    assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Sleep]);
    // Foreign name without actions: ignored.
    let r = tool_reply(vec![call("get_weather", json!({"city": "left"}))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert!(p.actions.is_empty());
    assert_eq!(p.source, ParseSource::None);
    // Our name with an odd key: the single argument is taken.
    let r = tool_reply(vec![call("interact_many", json!({"action_names": ["do"]}))]);
    assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Do]);
    let r = tool_reply(vec![call(
        "interact_many",
        json!({"seq": ["do"], "reason": "x"}),
    )]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![Do]);
    assert_eq!(p.reasoning.as_deref(), Some("x"));
}

#[test]
fn tool_call_named_after_action() {
    let r = tool_reply(vec![call("move_left", json!("{}"))]);
    assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![MoveLeft]);
    let r = tool_reply(vec![call("Do", json!({"reasoning": "tree"}))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![Do]);
    assert_eq!(p.reasoning.as_deref(), Some("tree"));
}

#[test]
fn tool_call_bare_string_and_array_arguments() {
    let r = tool_reply(vec![call("interact_many", json!("move_left, do"))]);
    assert_eq!(
        parse_reply(&r, Protocol::Tool, 8).actions,
        vec![MoveLeft, Do]
    );
    let r = tool_reply(vec![call("interact_many", json!(["move_up", "do"]))]);
    assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![MoveUp, Do]);
    let r = tool_reply(vec![call("interact_many", json!("[\"sleep\"]"))]);
    assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Sleep]);
}

#[test]
fn tool_call_double_encoded_and_wrapped() {
    let inner = r#"{"actions": ["do"]}"#;
    let double = serde_json::to_string(inner).unwrap();
    let p = args(&double);
    assert_eq!(p.actions, vec![Do]);
    let p = args(r#"{"name": "interact_many", "arguments": {"actions": ["place_stone"]}}"#);
    assert_eq!(p.actions, vec![PlaceStone]);
}

#[test]
fn tool_call_malformed_falls_back_to_text() {
    let mut r = tool_reply(vec![call("interact_many", json!("{}"))]);
    r.text = Some("I will go west.\nACTION: move_left".into());
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.source, ParseSource::Text);
    assert_eq!(p.reasoning.as_deref(), Some("I will go west."));
}

#[test]
fn tool_call_reasoning_priority() {
    let mut r = tool_reply(vec![call("interact_many", json!({"actions": ["do"]}))]);
    r.text = Some("Collecting wood.".into());
    assert_eq!(
        parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
        Some("Collecting wood.")
    );
    r.reasoning = Some("server thoughts".into());
    assert_eq!(
        parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
        Some("server thoughts")
    );
    r.tool_calls = vec![call(
        "interact_many",
        json!({"actions": ["do"], "reasoning": "arg"}),
    )];
    assert_eq!(
        parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
        Some("arg")
    );
}

// ---- JSON in text ----

#[test]
fn json_in_text_shapes() {
    let cases = [
        r#"{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}"#,
        r#"{"name": "interact_many", "arguments": "{\"actions\": [\"move_left\", \"do\"]}"}"#,
        r#"{"actions": ["move_left", "do"]}"#,
        "<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"move_left\", \"do\"]}}\n</tool_call>",
        "Let me act.\n```json\n{\"actions\": [\"move_left\", \"do\"]}\n```",
        r#"{"type": "function", "function": {"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}}"#,
        r#"{"tool_calls": [{"function": {"name": "interact_many", "arguments": "{\"actions\": [\"move_left\"]}"}}, {"name": "interact_many", "arguments": {"actions": ["do"]}}]}"#,
        r#"<tool_call>{"name": "interact_many", "arguments": {"actions": ["move_left", "do"#,
        r#"{"name": "interact_many", "parameters": {"actions": ["move_left", "do"]}}"#,
        r#"{"response": {"plan": {"actions": ["move_left", "do"]}}}"#,
        r#"[{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}]"#,
        "(see [note) then {'actions': ['move_left', 'do']}",
    ];
    for t in cases {
        let p = tool(t);
        assert_eq!(p.actions, vec![MoveLeft, Do], "{t}");
        assert_eq!(p.source, ParseSource::ToolJsonInText, "{t}");
    }
}

#[test]
fn json_in_text_multiple_qwen_calls_and_reasoning() {
    let t = "There is a tree to the west.\n<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"move_left\"]}}\n</tool_call>\n<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"do\"]}}\n</tool_call>";
    let p = tool(t);
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    assert_eq!(p.reasoning.as_deref(), Some("There is a tree to the west."));
}

#[test]
fn json_in_text_ignores_unrelated_braces() {
    let p = tool("Position: [32, 32], facing {0, 1}. ACTION: move_up");
    assert_eq!(p.actions, vec![MoveUp]);
    assert_eq!(p.source, ParseSource::Text);
    let p = tool("I see [tree, water].\n{\"health\": 9}\nAction: do");
    assert_eq!(p.actions, vec![Do]);
    assert_eq!(p.source, ParseSource::Text);
}

#[test]
fn json_in_text_string_array() {
    let p = tool("Plan: [\"move_left\", \"move_left\", \"do\"]");
    assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
    assert_eq!(p.source, ParseSource::ToolJsonInText);
}

#[test]
fn json_in_text_unknown_reported() {
    let p = tool(r#"{"actions": ["jump"]} ACTION: do"#);
    assert_eq!(p.actions, vec![Do]);
    assert_eq!(p.unknown, vec!["jump"]);
}

#[test]
fn json_in_text_under_text_protocol_one_action() {
    let p = textp(r#"{"actions": ["move_left", "do"]}"#);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.truncated, 1);
    assert_eq!(p.source, ParseSource::ToolJsonInText);
}

// ---- text ----

#[test]
fn text_action_line_last_wins() {
    let t = "Thinking: ACTION: move_right would hit water.\nSo instead:\nACTION: Move West";
    let p = textp(t);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.source, ParseSource::Text);
    let r = p.reasoning.unwrap();
    assert!(r.ends_with("So instead:"), "{r}");
}

#[test]
fn text_action_line_variants() {
    let cases = [
        ("ACTION: Move West", MoveLeft),
        ("Action: do", Do),
        ("action:noop", Noop),
        ("**Action:** Move North", MoveUp),
        ("**Action**: place_table", PlaceTable),
        ("Final action: sleep", Sleep),
        ("Next Action: Make Wood Pickaxe", MakeWoodPickaxe),
        ("Action:\n\nmove_down", MoveDown),
        ("ACTION: Move West (towards the tree)", MoveLeft),
        ("ACTION: `do` - collect the wood", Do),
        ("Action: Do.", Do),
        ("Answer: Do", Do),
        ("Final answer: Move South", MoveDown),
        ("Next move: east", MoveRight),
        ("Action 2: sleep", Sleep),
        (
            "I think we should go.\n\nAction: move up to reach the tree",
            MoveUp,
        ),
    ];
    for (t, a) in cases {
        assert_eq!(textp(t).actions, vec![a], "{t}");
        assert_eq!(tool(t).actions, vec![a], "{t}");
    }
}

#[test]
fn text_tags() {
    assert_eq!(
        textp("Reasoning.\n<action>move_left</action>").actions,
        vec![MoveLeft]
    );
    assert_eq!(textp("<|ACTION|>Move East<|END|>").actions, vec![MoveRight]);
    assert_eq!(textp("<action>Do</action> because tree").actions, vec![Do]);
    assert_eq!(textp("<ACTION>sleep").actions, vec![Sleep]);
    assert_eq!(
        textp("ACTION: <action>place_stone</action>").actions,
        vec![PlaceStone]
    );
    let p = tool("<action>move_left</action>\n<action>move_left</action>\n<action>do</action>");
    assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
    let p = tool("<actions>move_left, do</actions>");
    assert_eq!(p.actions, vec![MoveLeft, Do]);
}

#[test]
fn text_protocol_single_action_tool_protocol_sequence() {
    let t = "ACTION: move_left, move_left, do";
    let p = textp(t);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.truncated, 2);
    let p = tool(t);
    assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
    assert_eq!(p.truncated, 0);
    let t = "ACTION: move_left\nACTION: move_left\nACTION: do";
    assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
    assert_eq!(textp(t).actions, vec![Do]);
    let t = "Actions: move_left then move_up and do";
    assert_eq!(tool(t).actions, vec![MoveLeft, MoveUp, Do]);
    let t = "ACTIONS: Move West -> Move West -> Do";
    assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
}

#[test]
fn text_markers_on_one_line_split() {
    let t = "Previous action: move_left was blocked. Action: move_up";
    assert_eq!(textp(t).actions, vec![MoveUp]);
    assert_eq!(tool(t).actions, vec![MoveUp]);
    assert_eq!(
        textp("<action>Action: move_left</action>").actions,
        vec![MoveLeft]
    );
    assert_eq!(textp("ACTION: <action>do</action> now").actions, vec![Do]);
}

#[test]
fn text_marker_explanations_not_unknown() {
    let p = tool("ACTION: Move West, because the tree is there");
    assert_eq!(p.actions, vec![MoveLeft]);
    assert!(p.unknown.is_empty(), "{:?}", p.unknown);
    let p = tool("ACTION: move_left. Then do.");
    assert_eq!(p.actions, vec![MoveLeft, Do]);
    let p = textp("Sleep, since it is night");
    assert_eq!(p.actions, vec![Sleep]);
}

#[test]
fn text_action_label_then_list() {
    let t = "Actions:\n1. move_left\n2. move_left\n3. do\n\nThat should reach the tree.";
    let p = tool(t);
    assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
    assert!(p.unknown.is_empty());
    assert_eq!(textp(t).actions, vec![MoveLeft]);
}

#[test]
fn text_non_adjacent_markers_not_merged() {
    let t = "ACTION: move_right was my first idea.\nBut water is there, so\nACTION: move_left";
    assert_eq!(tool(t).actions, vec![MoveLeft]);
}

#[test]
fn text_marker_without_action_reports_unknown() {
    let p = textp("ACTION: jump over the river");
    assert!(p.actions.is_empty());
    assert_eq!(p.source, ParseSource::None);
    assert_eq!(p.unknown, vec!["jump over the river"]);
    // An earlier valid marker is used when the last is unusable.
    let p = textp("ACTION: do\nACTION: fly");
    assert_eq!(p.actions, vec![Do]);
}

#[test]
fn text_lists() {
    let t = "Plan:\n1. Move West\n2. Move West\n3. Do";
    assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
    assert_eq!(textp(t).actions, vec![MoveLeft]);
    let t = "My plan:\n- move_up (to the tree)\n- do - collect wood\n\nGood luck!";
    assert_eq!(tool(t).actions, vec![MoveUp, Do]);
    let t = "- Health is fine\n- Trees nearby\nSteps:\n* move_right\n* do";
    let p = tool(t);
    assert_eq!(p.actions, vec![MoveRight, Do]);
    assert_eq!(
        p.reasoning.as_deref(),
        Some("- Health is fine\n- Trees nearby\nSteps:")
    );
    let t = "Step 1: move_down\nStep 2: place_table";
    assert_eq!(tool(t).actions, vec![MoveDown, PlaceTable]);
}

#[test]
fn text_bare() {
    assert_eq!(textp("Move West").actions, vec![MoveLeft]);
    assert_eq!(textp("  do\n").actions, vec![Do]);
    assert_eq!(textp("3").actions, vec![MoveUp]);
    assert_eq!(
        tool("move_left, move_left, do").actions,
        vec![MoveLeft, MoveLeft, Do]
    );
    let p = textp("The tree is west of me, so I go there.\nMove West");
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(
        p.reasoning.as_deref(),
        Some("The tree is west of me, so I go there.")
    );
    assert_eq!(
        textp("Sleep.\nI am tired and it is night.").actions,
        vec![Sleep]
    );
}

#[test]
fn text_mentions_last_resort() {
    let p = textp("I considered move_right but I will choose move_left now.");
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(p.source, ParseSource::Text);
    let p = tool("The best idea is to Place Table here, I think.");
    assert_eq!(p.actions, vec![PlaceTable]);
    let p = tool("I should make wood pickaxe soon");
    assert_eq!(p.actions, vec![MakeWoodPickaxe]);
}

#[test]
fn text_nothing_usable() {
    for t in [
        "",
        "   ",
        "I don't know what to do here.",
        "Hello!",
        "left or right?",
    ] {
        let p = textp(t);
        assert!(p.actions.is_empty(), "{t}");
        assert_eq!(p.source, ParseSource::None, "{t}");
        assert_eq!(p.truncated, 0);
    }
    let p = parse_reply(&ReplyBuf::default(), Protocol::Tool, 8);
    assert!(p.actions.is_empty());
    assert_eq!(p.source, ParseSource::None);
    assert_eq!(p.reasoning, None);
}

#[test]
fn text_think_block_preferred() {
    let t = "<think>Maybe ACTION: move_right? No, water.</think>\nACTION: move_left";
    let p = textp(t);
    assert_eq!(p.actions, vec![MoveLeft]);
    assert_eq!(
        p.reasoning.as_deref(),
        Some("Maybe ACTION: move_right? No, water.")
    );
    // Only a think block: parse inside it.
    let p = textp("<think>I will go.\nACTION: move_down</think>");
    assert_eq!(p.actions, vec![MoveDown]);
}

#[test]
fn text_protocol_prefers_marker_over_tool_calls() {
    let mut r = text_reply("ACTION: do");
    r.tool_calls = vec![call("interact_many", json!({"actions": ["sleep"]}))];
    let p = parse_reply(&r, Protocol::Text, 8);
    assert_eq!(p.actions, vec![Do]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions, vec![Sleep]);
    assert_eq!(p.source, ParseSource::ToolCall);
    // Under Text a tool call is still a fallback.
    r.text = None;
    let p = parse_reply(&r, Protocol::Text, 8);
    assert_eq!(p.actions, vec![Sleep]);
    assert_eq!(p.source, ParseSource::ToolCall);
}

#[test]
fn server_reasoning_used_for_text() {
    let mut r = text_reply("ACTION: do");
    r.reasoning = Some("  deep thoughts ".into());
    assert_eq!(
        parse_reply(&r, Protocol::Text, 1).reasoning.as_deref(),
        Some("deep thoughts")
    );
    r.text = Some("nothing useful".into());
    let p = parse_reply(&r, Protocol::Text, 1);
    assert_eq!(p.source, ParseSource::None);
    assert_eq!(p.reasoning.as_deref(), Some("deep thoughts"));
}

// ---- serialisation and enums ----

#[test]
fn parsed_serialises() {
    let p = Parsed {
        actions: vec![MoveLeft, Do],
        reasoning: None,
        source: ParseSource::ToolJsonInText,
        unknown: vec!["jump".into()],
        truncated: 1,
        cut: None,
    };
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(
        v,
        json!({"actions": ["move_left", "do"], "reasoning": null,
               "source": "tool_json_in_text", "unknown": ["jump"], "truncated": 1})
    );
    assert_eq!(
        serde_json::to_value(ParseSource::ToolCall).unwrap(),
        json!("tool_call")
    );
    assert_eq!(
        serde_json::to_value(ParseSource::None).unwrap(),
        json!("none")
    );
}

#[test]
fn protocol_serde() {
    assert_eq!(serde_json::to_value(Protocol::Tool).unwrap(), json!("tool"));
    assert_eq!(
        serde_json::from_value::<Protocol>(json!("text")).unwrap(),
        Protocol::Text
    );
}

/// Needs the `clap` feature: `cargo test -p vlm-eval-parse --features clap`.
#[cfg(feature = "clap")]
#[test]
fn protocol_clap() {
    use clap::ValueEnum;
    assert_eq!(Protocol::from_str("tool", true).unwrap(), Protocol::Tool);
    assert_eq!(Protocol::from_str("TEXT", true).unwrap(), Protocol::Text);
    assert_eq!(Protocol::value_variants().len(), 2);
}

// ---- lenient reader ----

#[test]
fn lenient_reader_basics() {
    let v = |s: &str| Lenient::new(s, 0).value(0).unwrap();
    assert_eq!(
        v(r#"{"a": [1, 2.5, true, null]}"#),
        json!({"a": [1, 2.5, true, null]})
    );
    assert_eq!(v("{'a': 'b'}"), json!({"a": "b"}));
    assert_eq!(v("{a: b c, d: False}"), json!({"a": "b c", "d": false}));
    assert_eq!(
        v(r#"{"a": "x\"y\u00e9\ud83d\ude00\n"}"#),
        json!({"a": "x\"yé😀\n"})
    );
    assert_eq!(v(r#"{"a": ["b""#), json!({"a": ["b"]}));
    assert_eq!(v(r#"{"a": "\ud800"}"#), json!({"a": "\u{FFFD}"}));
    assert_eq!(v(r#"{"a": "\uZZ"}"#), json!({"a": "uZZ"}));
    assert_eq!(v("[1,,2,]"), json!([1, 2]));
    assert_eq!(v("{\"k\": }"), json!({"k": null}));
    assert_eq!(v("[:]"), json!([]));
    assert_eq!(v("{\"a\": \"é\\"), json!({"a": "é"}));
}

#[test]
fn strip_fence_variants() {
    assert_eq!(strip_fence("```json\n{}\n```"), "{}");
    assert_eq!(strip_fence("```\n[1]\n```"), "[1]");
    assert_eq!(strip_fence("```json{\"a\":1}```"), "{\"a\":1}");
    assert_eq!(strip_fence("```json\n{\"a\":1}"), "{\"a\":1}");
    assert_eq!(strip_fence("plain"), "plain");
}

// ---- robustness ----

/// A tiny deterministic generator (xorshift) for property-style tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const PIECES: [&str; 40] = [
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    ":",
    ",",
    "\\",
    "\\u",
    "\\ud83d",
    "```",
    "```json",
    "\n",
    " ",
    "<action>",
    "</action>",
    "<|ACTION|>",
    "<|END|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "ACTION:",
    "action",
    "actions",
    "interact_many",
    "move_left",
    "Move West",
    "do",
    "1.",
    "- ",
    "é",
    "😀",
    "\u{0}",
    "\u{feff}",
    "İ",
    "→",
    "then",
    "17",
];

fn random_text(rng: &mut Rng, max_len: usize) -> String {
    let n = rng.below(max_len + 1);
    let mut s = String::new();
    for _ in 0..n {
        match rng.below(3) {
            0 => s.push_str(PIECES[rng.below(PIECES.len())]),
            1 => s.push(char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('x')),
            _ => s.push((b' ' + rng.below(95) as u8) as char),
        }
    }
    s
}

fn check_invariants(p: &Parsed, protocol: Protocol, max: usize) {
    let cap = if protocol == Protocol::Text {
        1
    } else {
        max.max(1)
    };
    assert!(p.actions.len() <= cap);
    assert!(p.unknown.len() <= MAX_UNKNOWN);
    assert_eq!(p.actions.is_empty(), p.source == ParseSource::None);
    if p.actions.is_empty() {
        assert_eq!(p.truncated, 0);
    }
}

#[test]
fn never_panics_on_random_text() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..3000 {
        let text = random_text(&mut rng, 40);
        for protocol in [Protocol::Tool, Protocol::Text] {
            let max = i % 10;
            let p = parse_reply(&text_reply(&text), protocol, max);
            check_invariants(&p, protocol, max);
        }
        let _ = normalize_action(&text);
    }
}

#[test]
fn never_panics_on_random_tool_arguments() {
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    for i in 0..3000 {
        let s = random_text(&mut rng, 30);
        let name = if i % 3 == 0 {
            "interact_many"
        } else {
            PIECES[i % PIECES.len()]
        };
        let mut r = tool_reply(vec![call(name, Value::String(s.clone()))]);
        if i % 2 == 0 {
            r.text = Some(s);
        }
        for protocol in [Protocol::Tool, Protocol::Text] {
            let p = parse_reply(&r, protocol, 8);
            check_invariants(&p, protocol, 8);
        }
    }
}

#[test]
fn never_panics_on_pathological_inputs() {
    let deep_open = "[".repeat(100_000);
    let deep_obj = "{\"actions\":".repeat(10_000);
    let deep_json = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let many_braces = "{'".repeat(50_000);
    let huge_words = "move_left ".repeat(20_000);
    let huge_unicode = "é😀İ→".repeat(20_000);
    let many_markers = "ACTION: jump\n".repeat(5_000);
    let many_tags = "<action>".repeat(5_000);
    let many_lists = "- move_left\n".repeat(5_000);
    let megabyte = "lorem, ipsum; dolor\n".repeat(50_000);
    let inputs = [
        megabyte,
        deep_open,
        deep_obj,
        deep_json,
        many_braces,
        huge_words,
        huge_unicode,
        many_markers,
        many_tags,
        many_lists,
    ];
    for s in &inputs {
        for protocol in [Protocol::Tool, Protocol::Text] {
            let p = parse_reply(&text_reply(s), protocol, 8);
            check_invariants(&p, protocol, 8);
            let r = tool_reply(vec![call("interact_many", Value::String(s.clone()))]);
            let p = parse_reply(&r, protocol, 8);
            check_invariants(&p, protocol, 8);
        }
        let _ = normalize_action(s);
    }
    // Deep serde_json values as object arguments.
    let mut v = json!(["do"]);
    for _ in 0..120 {
        v = json!({ "actions": v });
    }
    let r = tool_reply(vec![call("interact_many", v)]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    check_invariants(&p, Protocol::Tool, 8);
}

#[test]
fn huge_list_reports_bounded_unknowns() {
    let list: Vec<String> = (0..1000).map(|i| format!("bad{i}")).collect();
    let r = tool_reply(vec![call("interact_many", json!({ "actions": list }))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert!(p.actions.is_empty());
    assert_eq!(p.unknown.len(), MAX_UNKNOWN);
    let long = "x".repeat(10_000);
    let r = tool_reply(vec![call("interact_many", json!({ "actions": [long] }))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert!(p.unknown[0].chars().count() <= MAX_UNKNOWN_CHARS + 1);
    let many = vec!["do"; 100_000];
    let r = tool_reply(vec![call("interact_many", json!({ "actions": many }))]);
    let p = parse_reply(&r, Protocol::Tool, 8);
    assert_eq!(p.actions.len(), 8);
    assert_eq!(p.truncated, 100_000 - 8);
}
