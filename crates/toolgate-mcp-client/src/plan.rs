//! What an imported tool becomes under our policy, decided from its definition and our ratings
//! alone. Pure: connecting and calling are [`super::upstream`]'s, declaring is
//! [`super::forwarded`]'s.
//!
//! Guarantees:
//! - the local name is `namespace__tool`, lower snake_case (a remote `readFile` or `get-file`
//!   becomes `read_file`, `get_file`); two remote names that map alike are both refused,
//!   so a call can never reach a tool other than the one the model saw;
//! - the risk comes from our ratings: the tool's own, else its server's, else high risk with
//!   an irreversible effect (an unrated tool always asks a human); a server's annotations
//!   never lower a risk: `destructiveHint` raises a server-wide rating to high, and
//!   `readOnlyHint` is ignored;
//! - the description shown to the model is bounded ([`MAX_DESCRIPTION_CHARS`]) and says which
//!   server it came from;
//! - an input schema that is not an object schema, or that the core refuses (references
//!   outside the schema, unbounded expansion, keywords the validator would ignore, over-size,
//!   over-deep) is refused with the reason, so the tool is not offered at all.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use toolgate_core::schema::check_declared;
use toolgate_core::tool::valid_tool_name;
use toolgate_core::{Effect, Risk};

/// Longest description (in characters) an imported tool may put in the model's context.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Between a server's namespace and the tool's own name.
pub const NAMESPACE_SEPARATOR: &str = "__";

/// A rating from our configuration: `risk` and `effect`, either of which may be left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rating {
    pub risk: Option<Risk>,
    pub effect: Option<Effect>,
}

/// Our ratings of one server's tools (`[mcp.servers.NAME]` in `toolgate.toml`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerRatings {
    /// For every tool of the server that has no rating of its own.
    #[serde(flatten)]
    pub server: Rating,
    /// Per tool, by the server's own name for it.
    #[serde(default)]
    pub tools: BTreeMap<String, Rating>,
    /// Whose token a call carries when the server asks for OAuth (see
    /// [`crate::users::CredentialMode`]); unset: each user's own behind `[serve.auth]`, the
    /// gateway's own login otherwise.
    #[serde(default)]
    pub credentials: Option<crate::users::CredentialMode>,
    /// What clients see while the server is down: its tools listed and failing fast
    /// (`fail`, the default), or left out of the list until it is back (`hide`).
    #[serde(default)]
    pub on_outage: crate::outage::OutageMode,
    /// Longest one call to this server may take, in seconds (default: `[mcp]
    /// call_timeout_secs`).
    pub call_timeout_secs: Option<u64>,
    /// Longest this server may take to start and finish the handshake, in seconds (default:
    /// `[mcp] connect_timeout_secs`).
    pub connect_timeout_secs: Option<u64>,
    /// Whether the server's sampling requests run on our model (`allow`) or are refused
    /// (`deny`, the default).
    #[serde(default)]
    pub sampling: SamplingPolicy,
    /// Tokens our model may generate for the server's sampling requests during one call
    /// (default [`DEFAULT_SAMPLING_MAX_TOKENS`]).
    pub sampling_max_tokens: Option<u32>,
}

/// What a server's sampling requests get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingPolicy {
    /// Refused, with a message naming the setting that allows it.
    #[default]
    Deny,
    /// Run on our model, within the call's budget.
    Allow,
}

/// Tokens a server's sampling may have generated per call unless `sampling_max_tokens` says.
pub const DEFAULT_SAMPLING_MAX_TOKENS: u32 = 1024;

/// Where an imported tool's risk came from, for `toolgate tools` and `toolgate mcp list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RiskSource {
    /// `[mcp.servers.NAME.tools.TOOL]`.
    ToolRating,
    /// `[mcp.servers.NAME]`.
    ServerRating,
    /// `[mcp.servers.NAME]`, raised to high because the server marks the tool destructive.
    ServerRatingRaised,
    /// Not rated: high risk, irreversible.
    Unrated,
}

impl RiskSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RiskSource::ToolRating => "config (tool)",
            RiskSource::ServerRating => "config (server)",
            RiskSource::ServerRatingRaised => "config (server), raised: server says destructive",
            RiskSource::Unrated => "unrated: high by default",
        }
    }
}

/// An imported tool as we will declare it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportPlan {
    /// `namespace__tool`, as the model and our policy name it.
    pub local_name: String,
    /// The server's own name, as calls are forwarded.
    pub remote_name: String,
    pub namespace: String,
    /// The server's description (or title), bounded.
    pub description: String,
    pub input_schema: Value,
    pub risk: Risk,
    pub effect: Effect,
    pub risk_source: RiskSource,
    /// The digest of the definition this plan was made from ([`super::pins::tool_digest`]).
    pub digest: String,
}

/// Why a tool is not imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportRefusal {
    #[error("the definition has no string `name`")]
    NoName,
    #[error(
        "`{remote}` cannot become a tool name (lower snake_case, at most 64 characters with the `{namespace}__` prefix)"
    )]
    BadName { namespace: String, remote: String },
    #[error("`{remote}` maps to `{local}`, as `{other}` does: neither is imported")]
    NameClash {
        remote: String,
        other: String,
        local: String,
    },
    #[error("its input schema is not an object schema (`type: \"object\"`)")]
    NotAnObjectSchema,
    #[error("its input schema is refused: {0}")]
    Schema(String),
}

/// The local name of `remote` in `namespace` (`everything`, `getTinyImage` →
/// `everything__get_tiny_image`), or `None` when it cannot be one.
pub fn local_name(namespace: &str, remote: &str) -> Option<String> {
    let mut mapped = String::with_capacity(remote.len() + 4);
    let mut previous_lower = false;
    for c in remote.chars() {
        if c.is_ascii_uppercase() {
            if previous_lower {
                mapped.push('_');
            }
            mapped.push(c.to_ascii_lowercase());
            previous_lower = false;
        } else if c.is_ascii_lowercase() || c.is_ascii_digit() {
            mapped.push(c);
            previous_lower = true;
        } else if c == '_' || c == '-' || c == '.' || c == ' ' || c == '/' {
            mapped.push('_');
            previous_lower = false;
        } else {
            return None;
        }
    }
    let mapped = mapped.trim_matches('_');
    if mapped.is_empty() {
        return None;
    }
    let name = format!("{namespace}{NAMESPACE_SEPARATOR}{mapped}");
    valid_tool_name(&name).then_some(name)
}

/// The risk, effect and their source for `remote` under `ratings`, given the server's
/// `destructiveHint` for it.
pub fn rate(
    ratings: Option<&ServerRatings>,
    remote: &str,
    destructive_hint: bool,
) -> (Risk, Effect, RiskSource) {
    let unrated = (Risk::High, Effect::Irreversible, RiskSource::Unrated);
    let Some(ratings) = ratings else {
        return unrated;
    };
    let fill = |rating: &Rating| {
        (
            rating.risk.unwrap_or(Risk::High),
            rating.effect.unwrap_or(Effect::Irreversible),
        )
    };
    if let Some(tool) = ratings.tools.get(remote) {
        let (risk, effect) = fill(tool);
        return (risk, effect, RiskSource::ToolRating);
    }
    if ratings.server == Rating::default() {
        return unrated;
    }
    let (risk, effect) = fill(&ratings.server);
    if destructive_hint && risk < Risk::High {
        let effect = if effect.writes() {
            effect
        } else {
            Effect::Irreversible
        };
        return (Risk::High, effect, RiskSource::ServerRatingRaised);
    }
    (risk, effect, RiskSource::ServerRating)
}

/// The model-facing text of a remote description: bounded, with the cut said.
pub fn bounded_description(text: &str) -> String {
    let text = text.trim();
    let total = text.chars().count();
    if total <= MAX_DESCRIPTION_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(MAX_DESCRIPTION_CHARS).collect();
    format!(
        "{kept} [description cut: {} more characters]",
        total - MAX_DESCRIPTION_CHARS
    )
}

/// Plans every tool of one server's catalogue: the accepted ones by local name, and the
/// refused ones (by remote name, or the definition's index when it has no name) with the
/// reason.
pub fn plan_server(
    namespace: &str,
    tools: &[Value],
    ratings: Option<&ServerRatings>,
) -> (Vec<ImportPlan>, BTreeMap<String, ImportRefusal>) {
    let mut refused = BTreeMap::new();
    let mut by_local: BTreeMap<String, Vec<ImportPlan>> = BTreeMap::new();
    for (index, tool) in tools.iter().enumerate() {
        match plan_tool(namespace, tool, ratings) {
            Ok(plan) => by_local
                .entry(plan.local_name.clone())
                .or_default()
                .push(plan),
            Err(refusal) => {
                let key = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("#{index}"), str::to_string);
                refused.insert(key, refusal);
            }
        }
    }
    let mut accepted = Vec::new();
    for (local, mut plans) in by_local {
        if plans.len() == 1 {
            accepted.extend(plans.pop());
            continue;
        }
        let names: Vec<String> = plans.iter().map(|p| p.remote_name.clone()).collect();
        for (i, plan) in plans.iter().enumerate() {
            let other = names[(i + 1) % names.len()].clone();
            refused.insert(
                plan.remote_name.clone(),
                ImportRefusal::NameClash {
                    remote: plan.remote_name.clone(),
                    other,
                    local: local.clone(),
                },
            );
        }
    }
    (accepted, refused)
}

/// Plans one tool definition (an MCP `Tool` object).
pub fn plan_tool(
    namespace: &str,
    tool: &Value,
    ratings: Option<&ServerRatings>,
) -> Result<ImportPlan, ImportRefusal> {
    let remote = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or(ImportRefusal::NoName)?;
    let local = local_name(namespace, remote).ok_or_else(|| ImportRefusal::BadName {
        namespace: namespace.into(),
        remote: remote.into(),
    })?;
    let schema = tool
        .get("inputSchema")
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
        .ok_or(ImportRefusal::NotAnObjectSchema)?;
    check_declared(schema, true).map_err(|e| ImportRefusal::Schema(e.to_string()))?;
    let text = [tool.get("description"), tool.get("title")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|t| !t.trim().is_empty())
        .unwrap_or("(the server gives no description)");
    let destructive = tool
        .pointer("/annotations/destructiveHint")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (risk, effect, risk_source) = rate(ratings, remote, destructive);
    Ok(ImportPlan {
        local_name: local,
        remote_name: remote.into(),
        namespace: namespace.into(),
        description: bounded_description(text),
        input_schema: schema.clone(),
        risk,
        effect,
        risk_source,
        digest: super::pins::tool_digest(tool),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ratings(text: &str) -> ServerRatings {
        toml::from_str(text).unwrap()
    }

    fn tool(name: &str) -> Value {
        json!({"name": name, "description": "Does a thing.", "inputSchema": {"type": "object"}})
    }

    #[test]
    fn remote_names_map_to_namespaced_snake_case_or_are_refused() {
        let cases = [
            ("echo", Some("everything__echo")),
            ("getTinyImage", Some("everything__get_tiny_image")),
            ("read-file", Some("everything__read_file")),
            ("a.b", Some("everything__a_b")),
            ("HTTPGet", Some("everything__httpget")),
            ("_x_", Some("everything__x")),
            ("naïve", None),
            ("", None),
            ("---", None),
            (&"x".repeat(60), None),
        ];
        for (remote, want) in cases {
            assert_eq!(
                local_name("everything", remote).as_deref(),
                want,
                "{remote}"
            );
        }
    }

    #[test]
    fn unrated_tool_is_high_risk_and_irreversible() {
        assert_eq!(
            rate(None, "echo", false),
            (Risk::High, Effect::Irreversible, RiskSource::Unrated)
        );
        let empty = ServerRatings::default();
        assert_eq!(rate(Some(&empty), "echo", false).2, RiskSource::Unrated);
    }

    #[test]
    fn tool_rating_wins_over_server_rating() {
        let r = ratings(
            "risk = \"medium\"\neffect = \"undoable_write\"\n[tools.echo]\nrisk = \"low\"\neffect = \"read\"",
        );
        assert_eq!(
            rate(Some(&r), "echo", true),
            (Risk::Low, Effect::Read, RiskSource::ToolRating)
        );
        assert_eq!(
            rate(Some(&r), "other", false),
            (
                Risk::Medium,
                Effect::UndoableWrite,
                RiskSource::ServerRating
            )
        );
    }

    #[test]
    fn destructive_hint_raises_a_server_rating_and_read_only_hint_never_lowers() {
        let r = ratings("risk = \"low\"\neffect = \"read\"");
        assert_eq!(
            rate(Some(&r), "delete_all", true),
            (
                Risk::High,
                Effect::Irreversible,
                RiskSource::ServerRatingRaised
            )
        );
        let unrated = json!({"name": "wipe", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": true, "destructiveHint": false}});
        let plan = plan_tool("s", &unrated, None).unwrap();
        assert_eq!((plan.risk, plan.effect), (Risk::High, Effect::Irreversible));
    }

    #[test]
    fn a_rating_that_names_only_one_half_fills_the_other_conservatively() {
        let r = ratings("[tools.a]\neffect = \"read\"\n[tools.b]\nrisk = \"low\"");
        assert_eq!(rate(Some(&r), "a", false).0, Risk::High);
        assert_eq!(rate(Some(&r), "b", false).1, Effect::Irreversible);
    }

    #[test]
    fn unknown_rating_keys_and_values_are_refused() {
        assert!(toml::from_str::<ServerRatings>("risk = \"none\"").is_err());
        assert!(toml::from_str::<ServerRatings>("auto_approve = true").is_err());
        assert!(toml::from_str::<ServerRatings>("[tools.a]\nrisky = \"low\"").is_err());
    }

    #[test]
    fn long_descriptions_are_cut_and_say_so() {
        let long = "ab".repeat(MAX_DESCRIPTION_CHARS);
        let cut = bounded_description(&long);
        assert!(cut.starts_with(&long[..MAX_DESCRIPTION_CHARS]));
        assert!(cut.ends_with(&format!(
            "[description cut: {MAX_DESCRIPTION_CHARS} more characters]"
        )));
        assert_eq!(bounded_description("  short  "), "short");
        let plan = plan_tool(
            "s",
            &json!({"name": "t", "description": long, "inputSchema": {"type": "object"}}),
            None,
        )
        .unwrap();
        assert!(plan.description.chars().count() < MAX_DESCRIPTION_CHARS + 60);
    }

    #[test]
    fn schema_that_reaches_outside_itself_or_is_not_an_object_is_refused() {
        let cases = [
            (
                json!({"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}}}),
                "refused",
            ),
            (
                json!({"name": "b", "inputSchema": {"type": "string"}}),
                "not an object schema",
            ),
            (json!({"name": "c"}), "not an object schema"),
            (
                json!({"name": "d", "inputSchema": {"type": "object", "x-vendor": 1}}),
                "refused",
            ),
        ];
        for (definition, want) in cases {
            let err = plan_tool("s", &definition, None).unwrap_err();
            assert!(err.to_string().contains(want), "{definition}: {err}");
        }
    }

    #[test]
    fn schema_with_unbounded_composition_is_refused() {
        // Each level refers to the next one twice: 2^40 subschemas once expanded.
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            defs.insert(
                format!("l{i}"),
                json!({"anyOf": [{"$ref": format!("#/$defs/l{}", i + 1)}, {"$ref": format!("#/$defs/l{}", i + 1)}]}),
            );
        }
        defs.insert("l40".into(), json!({"type": "string"}));
        let bomb = json!({"name": "bomb", "inputSchema": {"type": "object", "$defs": defs,
                          "properties": {"x": {"$ref": "#/$defs/l0"}}}});
        let err = plan_tool("s", &bomb, None).unwrap_err();
        assert!(matches!(err, ImportRefusal::Schema(_)), "{err}");
    }

    #[test]
    fn two_remote_names_that_map_alike_are_both_refused() {
        let tools = [tool("readFile"), tool("read_file"), tool("echo")];
        let (accepted, refused) = plan_server("fs", &tools, None);
        assert_eq!(
            accepted
                .iter()
                .map(|p| p.local_name.as_str())
                .collect::<Vec<_>>(),
            ["fs__echo"]
        );
        assert_eq!(refused.len(), 2);
        assert!(matches!(
            refused["readFile"],
            ImportRefusal::NameClash { .. }
        ));
        assert!(matches!(
            refused["read_file"],
            ImportRefusal::NameClash { .. }
        ));
    }

    #[test]
    fn a_definition_without_a_name_is_refused_by_index() {
        let (accepted, refused) = plan_server("s", &[json!({"inputSchema": {}})], None);
        assert!(accepted.is_empty());
        assert_eq!(refused["#0"], ImportRefusal::NoName);
    }
}
