//! The function tool offered under the tool protocol, and Crafter action display names.
//!
//! The tool follows synth-ai's `interact_many` shape so that traces and SFT rows stay
//! interchangeable: one function whose `actions` argument is an array of the 17 canonical
//! lowercase action names (a JSON-schema enum, `minItems` 1, `maxItems` the per-turn limit),
//! plus an optional `reasoning` string. `additionalProperties` is false and only `actions` is
//! required, so strict servers still validate a call without reasoning. The harness enforces
//! `maxItems` itself when parsing (see [`crate::agent::parse`]); servers often do not.
//!
//! Display names are BALROG's (and SmartPlay's): `move_left` is "Move West", `move_right`
//! "Move East", `move_up` "Move North", `move_down` "Move South".

use serde_json::json;

use crate::crafter::rules::ACTION_NAMES;
use crate::model::ToolSpec;
pub use vlm_eval_parse::{display_name, TOOL_NAME};

/// The `interact_many` function tool allowing 1..=`max_actions` actions (0 is treated as 1).
pub fn interact_many_tool(max_actions: usize) -> ToolSpec {
    let max = max_actions.max(1);
    let description = if max == 1 {
        "Perform one Crafter action (one game step).".to_string()
    } else {
        format!(
            "Perform a short sequence of Crafter actions in order (1 to {max}), one game step \
             each. Later actions are skipped if the episode ends."
        )
    };
    ToolSpec {
        name: TOOL_NAME.to_string(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "actions": {
                    "type": "array",
                    "description": format!("Actions to perform in order (1 to {max})."),
                    "items": {"type": "string", "enum": ACTION_NAMES},
                    "minItems": 1,
                    "maxItems": max,
                },
                "reasoning": {
                    "type": "string",
                    "description": "Optional: a brief explanation of why these actions.",
                },
            },
            "required": ["actions"],
            "additionalProperties": false,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crafter::rules::Action;
    use serde_json::Value;

    #[test]
    fn tool_schema_shape() {
        let t = interact_many_tool(8);
        assert_eq!(t.name, "interact_many");
        assert_eq!(t.name, TOOL_NAME);
        assert!(t.description.contains("1 to 8"));
        let p = &t.parameters;
        assert_eq!(p["type"], "object");
        assert_eq!(p["required"], json!(["actions"]));
        assert_eq!(p["additionalProperties"], Value::Bool(false));
        let actions = &p["properties"]["actions"];
        assert_eq!(actions["type"], "array");
        assert_eq!(actions["minItems"], 1);
        assert_eq!(actions["maxItems"], 8);
        assert_eq!(actions["items"]["type"], "string");
        let en: Vec<&str> = actions["items"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(en, ACTION_NAMES.to_vec());
        assert_eq!(p["properties"]["reasoning"]["type"], "string");
        // Only two properties, actions first.
        let keys: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["actions", "reasoning"]);
    }

    #[test]
    fn tool_max_items_follows_argument() {
        for n in [1usize, 2, 5, 16, 100] {
            let t = interact_many_tool(n);
            assert_eq!(t.parameters["properties"]["actions"]["maxItems"], n);
        }
        assert!(interact_many_tool(1)
            .description
            .contains("one Crafter action"));
    }

    #[test]
    fn tool_zero_max_is_one() {
        let t = interact_many_tool(0);
        assert_eq!(t.parameters["properties"]["actions"]["maxItems"], 1);
        assert_eq!(t.parameters["properties"]["actions"]["minItems"], 1);
    }

    #[test]
    fn tool_serialises_round_trip() {
        let t = interact_many_tool(4);
        let s = serde_json::to_string(&t).unwrap();
        let back: ToolSpec = serde_json::from_str(&s).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn display_names_match_balrog() {
        assert_eq!(display_name(Action::Noop), "Noop");
        assert_eq!(display_name(Action::MoveLeft), "Move West");
        assert_eq!(display_name(Action::MoveRight), "Move East");
        assert_eq!(display_name(Action::MoveUp), "Move North");
        assert_eq!(display_name(Action::MoveDown), "Move South");
        assert_eq!(display_name(Action::Do), "Do");
        assert_eq!(display_name(Action::Sleep), "Sleep");
        assert_eq!(display_name(Action::PlaceStone), "Place Stone");
        assert_eq!(display_name(Action::PlaceTable), "Place Table");
        assert_eq!(display_name(Action::PlaceFurnace), "Place Furnace");
        assert_eq!(display_name(Action::PlacePlant), "Place Plant");
        assert_eq!(display_name(Action::MakeWoodPickaxe), "Make Wood Pickaxe");
        assert_eq!(display_name(Action::MakeStonePickaxe), "Make Stone Pickaxe");
        assert_eq!(display_name(Action::MakeIronPickaxe), "Make Iron Pickaxe");
        assert_eq!(display_name(Action::MakeWoodSword), "Make Wood Sword");
        assert_eq!(display_name(Action::MakeStoneSword), "Make Stone Sword");
        assert_eq!(display_name(Action::MakeIronSword), "Make Iron Sword");
    }

    #[test]
    fn display_names_distinct_and_match_canonical_for_non_moves() {
        let mut seen = std::collections::HashSet::new();
        for a in Action::ALL {
            let d = display_name(a);
            assert!(seen.insert(d), "duplicate {d}");
            if !a.name().starts_with("move_") {
                assert_eq!(d.to_lowercase().replace(' ', "_"), a.name());
            }
        }
    }
}
