//! Which tool definitions a run sends: all of them, or, past a threshold, a standing set (the
//! always-loaded tools and `tool_search`) that grows by appending what searches find.
//!
//! Guarantees: the list only ever grows at its end: a definition once sent never moves, changes
//! or disappears, so the bytes of every earlier request's tool list are a prefix of every later
//! one's (the prompt-cache prefix survives); a found tool is appended once, in the order found;
//! only tools the caller may call (the registry's view for its principal) are ever listed,
//! whatever a search result names; below the threshold, or when the registry offers no
//! `tool_search`, every visible tool is sent as before and `tool_search` is not.
//!
//! Refuses nothing: always-loaded names the caller cannot see are ignored (a config may list
//! tools of several toolsets).

use std::collections::BTreeSet;

use toolgate_core::tool_search::TOOL_SEARCH;
use toolgate_llm::ToolDefinition;

/// Default threshold: more visible tools than this and the run defers. Measured on the embedded
/// model (README, "Tool search"): at 10 tools the search round costs more tokens than the
/// definitions it saves; at 50 and 200 deferral sends far fewer.
pub const DEFAULT_DEFER_THRESHOLD: usize = 30;

/// When and how a run defers tool definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferralConfig {
    /// Defer when the caller may call more than this many tools (`tool_search` not counted).
    pub threshold: usize,
    /// Tools sent from the first round when deferring, by name, in this order after
    /// `tool_search`.
    pub always_loaded: Vec<String>,
    /// When deferring, how many tools the runtime finds for the user's message before the
    /// first request (the `tool_search` index ranks the catalogue against the message, through
    /// the dispatcher), sent after the standing set; 0 finds none. A model that never calls
    /// `tool_search` (the embedded one) still gets the likely tools; later searches append
    /// after them as before.
    pub preload: usize,
}

/// Default preload: the tools the `tool_search` index ranks first for the user's message, 8
/// of them. Measured on the embedded model (README, "Tool search"): with 8 preloaded it chose
/// the right tool in 12 of 12 tasks at 50 and at 200 tools, sending a quarter (50) and a tenth
/// (200) of the tokens of every definition; without the preload it never searched and chose
/// right in 1 of 12. 8 is the smallest count whose top k held every task's tool among 200.
pub const DEFAULT_PRELOAD: usize = 8;

impl Default for DeferralConfig {
    fn default() -> Self {
        DeferralConfig {
            threshold: DEFAULT_DEFER_THRESHOLD,
            always_loaded: Vec::new(),
            preload: DEFAULT_PRELOAD,
        }
    }
}

/// At most this many characters of the user's message go into the preload search (the
/// `tool_search` query's own limit, 200; cut at a word).
pub const PRELOAD_QUERY_CHARS: usize = 200;

/// The preload search's query: the user's words, cut at a word within
/// [`PRELOAD_QUERY_CHARS`]. `None` when nothing searchable is left.
pub fn preload_query(message: &str) -> Option<String> {
    let mut query = String::new();
    for word in message.split_whitespace() {
        let needed = query.chars().count() + usize::from(!query.is_empty()) + word.chars().count();
        if needed > PRELOAD_QUERY_CHARS {
            break;
        }
        if !query.is_empty() {
            query.push(' ');
        }
        query.push_str(word);
    }
    (!query.is_empty()).then_some(query)
}

/// The tool list of one run.
#[derive(Debug, Clone)]
pub struct ToolList {
    /// Every tool the caller may call, except `tool_search`.
    visible: Vec<ToolDefinition>,
    sent: Vec<ToolDefinition>,
    /// How many of `sent` formed the first request's list.
    standing: usize,
    deferred: bool,
}

impl ToolList {
    /// The list for a caller who may call `visible` (the registry's model views for its
    /// principal, `tool_search` among them when the registry has it).
    pub fn plan(visible: Vec<ToolDefinition>, config: Option<&DeferralConfig>) -> ToolList {
        let (search, visible): (Vec<ToolDefinition>, Vec<ToolDefinition>) =
            visible.into_iter().partition(|t| t.name == TOOL_SEARCH);
        let defer = match (config, search.first()) {
            (Some(config), Some(_)) => visible.len() > config.threshold,
            _ => false,
        };
        let sent: Vec<ToolDefinition> = match (defer, config) {
            (true, Some(config)) => {
                let mut sent = search;
                let mut names = BTreeSet::new();
                for name in &config.always_loaded {
                    if let Some(tool) = visible.iter().find(|t| &t.name == name)
                        && names.insert(name.clone())
                    {
                        sent.push(tool.clone());
                    }
                }
                sent
            }
            _ => visible.clone(),
        };
        ToolList {
            standing: sent.len(),
            visible,
            sent,
            deferred: defer,
        }
    }

    /// What the next request sends.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.sent
    }

    /// How many leading definitions never change (all of them, for a run that does not defer).
    pub fn standing(&self) -> usize {
        self.standing
    }

    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// Appends the definitions of `found` (names a search returned, best first) that the
    /// caller may call and that are not listed yet; returns the names appended. Does nothing
    /// for a run that does not defer.
    pub fn append_found(&mut self, found: &[String]) -> Vec<String> {
        if !self.deferred {
            return Vec::new();
        }
        let mut appended = Vec::new();
        for name in found {
            if self.sent.iter().any(|t| &t.name == name) {
                continue;
            }
            if let Some(tool) = self.visible.iter().find(|t| &t.name == name) {
                self.sent.push(tool.clone());
                appended.push(name.clone());
            }
        }
        appended
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_long_message_never_makes_a_query_the_search_refuses() {
        let long = "word ".repeat(100);
        let cases: [(&str, &str, Option<usize>); 4] = [
            (
                "a short question is the query",
                "convert 20 euros to dollars",
                Some(27),
            ),
            (
                "a long message is cut at a word within the limit",
                &long,
                Some(199),
            ),
            ("blank text searches nothing", "  \n\t ", None),
            (
                "one word longer than the limit is not cut mid-word",
                &"x".repeat(300),
                None,
            ),
        ];
        for (name, message, chars) in cases {
            let query = preload_query(message);
            assert_eq!(query.as_ref().map(|q| q.chars().count()), chars, "{name}");
            if let Some(q) = query {
                assert!(q.chars().count() <= PRELOAD_QUERY_CHARS, "{name}");
            }
        }
    }

    fn def(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("{name} does things."),
            input_schema: json!({"type": "object", "properties": {}}),
        }
    }

    fn catalogue(n: usize, with_search: bool) -> Vec<ToolDefinition> {
        let mut tools: Vec<ToolDefinition> = (0..n).map(|i| def(&format!("t{i:03}"))).collect();
        if with_search {
            tools.push(def(TOOL_SEARCH));
        }
        tools
    }

    fn names(tools: &[ToolDefinition]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn config(threshold: usize, always: &[&str]) -> DeferralConfig {
        DeferralConfig {
            threshold,
            always_loaded: always.iter().map(|s| s.to_string()).collect(),
            preload: 0,
        }
    }

    #[test]
    fn deferral_is_off_below_the_threshold_and_without_tool_search() {
        let cases: Vec<(&str, usize, bool, Option<DeferralConfig>, bool, usize)> = vec![
            (
                "below the threshold",
                10,
                true,
                Some(config(30, &[])),
                false,
                10,
            ),
            (
                "at the threshold",
                30,
                true,
                Some(config(30, &[])),
                false,
                30,
            ),
            (
                "above the threshold",
                31,
                true,
                Some(config(30, &["t001"])),
                true,
                2,
            ),
            (
                "no tool_search in the registry",
                200,
                false,
                Some(config(30, &[])),
                false,
                200,
            ),
            ("deferral switched off", 200, true, None, false, 200),
        ];
        for (label, n, with_search, config, deferred, sent) in cases {
            let list = ToolList::plan(catalogue(n, with_search), config.as_ref());
            assert_eq!(list.is_deferred(), deferred, "{label}");
            assert_eq!(list.definitions().len(), sent, "{label}");
            assert_eq!(list.standing(), sent, "{label}");
            let has_search = names(list.definitions()).contains(&TOOL_SEARCH);
            assert_eq!(
                has_search, deferred,
                "{label}: tool_search is sent only when deferring"
            );
        }
    }

    #[test]
    fn the_standing_set_is_tool_search_then_the_always_loaded_tools_the_caller_can_see() {
        let list = ToolList::plan(
            catalogue(40, true),
            Some(&config(5, &["t007", "not_visible", "t002", "t007"])),
        );
        assert_eq!(names(list.definitions()), vec![TOOL_SEARCH, "t007", "t002"]);
    }

    #[test]
    fn appending_never_moves_or_changes_a_tool_already_sent() {
        let mut list = ToolList::plan(catalogue(60, true), Some(&config(5, &["t000"])));
        let searches: &[&[&str]] = &[
            &["t010", "t011"],
            &["t011", "t000", "t012"],
            &[],
            &["t013", "t010", "t013"],
        ];
        let mut before = list.definitions().to_vec();
        for found in searches {
            let found: Vec<String> = found.iter().map(|s| s.to_string()).collect();
            let appended = list.append_found(&found);
            let after = list.definitions();
            assert_eq!(&after[..before.len()], &before[..], "{found:?}");
            assert_eq!(names(&after[before.len()..]), appended, "{found:?}");
            before = after.to_vec();
        }
        assert_eq!(
            names(list.definitions()),
            vec![TOOL_SEARCH, "t000", "t010", "t011", "t012", "t013"]
        );
        assert_eq!(list.standing(), 2);
    }

    #[test]
    fn a_found_name_the_caller_cannot_call_is_never_listed() {
        let mut list = ToolList::plan(catalogue(40, true), Some(&config(5, &[])));
        let appended = list.append_found(&[
            "payroll_run".to_string(),
            TOOL_SEARCH.to_string(),
            "t003".to_string(),
        ]);
        assert_eq!(appended, vec!["t003"]);
        assert_eq!(names(list.definitions()), vec![TOOL_SEARCH, "t003"]);
    }

    #[test]
    fn a_run_that_does_not_defer_never_grows() {
        let mut list = ToolList::plan(catalogue(5, true), Some(&config(30, &[])));
        assert!(list.append_found(&["t001".to_string()]).is_empty());
        assert_eq!(list.definitions().len(), 5);
    }
}
