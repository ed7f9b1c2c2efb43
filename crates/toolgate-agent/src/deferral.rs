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
    /// Tools a phase rule keeps back (see [`crate::phases`]): never sent, never appended by a
    /// search, until released.
    withheld: BTreeSet<String>,
    /// Tools the policy's phases keep closed in this run now (`toolgate_core::phase_gate`):
    /// not sent; unlike withheld tools, a call to one still goes to the dispatcher, which
    /// refuses it on the record.
    closed: BTreeSet<String>,
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
            withheld: BTreeSet::new(),
            closed: BTreeSet::new(),
        }
    }

    /// Keeps `names` back before the first request: they leave the list (and the standing
    /// count) until [`ToolList::release`] appends them.
    pub fn withhold(&mut self, names: &BTreeSet<String>) {
        self.sent.retain(|t| !names.contains(&t.name));
        self.standing = self.sent.len();
        self.withheld.extend(names.iter().cloned());
    }

    /// Whether `name` is kept back now.
    pub fn is_withheld(&self, name: &str) -> bool {
        self.withheld.contains(name)
    }

    /// Appends the withheld tools that are not in `still_withheld` (their rule now holds), in
    /// the caller's visible order; returns the names appended.
    pub fn release(&mut self, still_withheld: &BTreeSet<String>) -> Vec<String> {
        let released: Vec<String> = self
            .withheld
            .iter()
            .filter(|n| !still_withheld.contains(*n))
            .cloned()
            .collect();
        if released.is_empty() {
            return Vec::new();
        }
        self.withheld.retain(|n| still_withheld.contains(n));
        let mut appended = Vec::new();
        for tool in &self.visible {
            if released.contains(&tool.name) && !self.sent.iter().any(|t| t.name == tool.name) {
                self.sent.push(tool.clone());
                appended.push(tool.name.clone());
            }
        }
        appended
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

    /// Follows the run's catalogue: the tools in `closed` leave the list (a standing one
    /// shrinks the standing count: this happens before the first request, when the run's
    /// catalogue is first read), and the tools that were closed and are not any more are
    /// appended in the caller's visible order. Returns (opened, closed) names, each only when
    /// the list changed.
    pub fn follow_catalogue(&mut self, closed: &BTreeSet<String>) -> (Vec<String>, Vec<String>) {
        let mut closing = Vec::new();
        let mut index = 0;
        while index < self.sent.len() {
            if closed.contains(&self.sent[index].name) {
                let tool = self.sent.remove(index);
                if index < self.standing {
                    self.standing -= 1;
                }
                closing.push(tool.name);
            } else {
                index += 1;
            }
        }
        let mut opening = Vec::new();
        for tool in &self.visible {
            let was_closed = self.closed.contains(&tool.name);
            if was_closed
                && !closed.contains(&tool.name)
                && !self.withheld.contains(&tool.name)
                && !self.sent.iter().any(|t| t.name == tool.name)
            {
                self.sent.push(tool.clone());
                opening.push(tool.name.clone());
            }
        }
        self.closed = closed.clone();
        (opening, closing)
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
            if self.withheld.contains(name)
                || self.closed.contains(name)
                || self.sent.iter().any(|t| &t.name == name)
            {
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
#[path = "deferral_tests.rs"]
mod tests;
