//! Which of a call's values came from untrusted text rather than from the user.
//!
//! A caller that knows the conversation (our loop) hands the dispatcher [`TaintSources`]: what
//! the user wrote, the untrusted texts the model has read (clipped pages, untrusted notes,
//! remote tool results) and the trusted results of our own tools. [`find_taint`] is a pure
//! function of a call's arguments (and the preview of what it will do) and those sources.
//!
//! Rule: a value is tainted when it appears in an untrusted text and nowhere in what the user
//! wrote. Checked per string leaf: the recipients, addresses and hosts inside it (e-mail
//! addresses, URLs and their hosts), the whole value when it is short enough to be an id, a tag
//! or a title, and runs of [`SHINGLE_WORDS`] words for long values (a body copied from a page).
//! A number (a note or draft id) is tainted only when it stands as its own token in untrusted
//! text, the user never wrote it, and none of our own tools' trusted results contained it: ids
//! legitimately come from our results, and a bare number matches too much text otherwise.
//! Matching ignores case and runs of whitespace.
//!
//! What it does not do: follow a value through the store (text the model wrote into a note
//! and read back is the model's, not the page's, by then), or see paraphrase. It is a second
//! line after approval, measured by the injection suite, not a proof.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::{Effect, Risk};

/// Runs of this many words of a long value are looked for in untrusted text.
pub const SHINGLE_WORDS: usize = 8;
/// A whole string value shorter than this is not matched on its own (a word such as "work"
/// or "yes" appears in every page).
pub const MIN_WHOLE_CHARS: usize = 6;
/// A string value longer than this is matched by its runs of words, not whole.
pub const MAX_WHOLE_CHARS: usize = 200;
/// A tainted value is quoted up to this many characters.
const QUOTE_CHARS: usize = 80;

/// One untrusted text the model has read, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UntrustedSource {
    /// The observation's own label of the text (`note 7 (clipped from https://...)`).
    pub origin: String,
    /// The text's first line, as a person would name it (a page or note title).
    pub title: String,
    /// The tool whose result carried it, and that call's id.
    pub tool: String,
    pub call_id: String,
    /// The text, normalized for matching.
    #[serde(skip)]
    normalized: String,
}

impl UntrustedSource {
    pub fn new(origin: &str, text: &str, tool: &str, call_id: &str) -> Self {
        let title = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        UntrustedSource {
            origin: origin.into(),
            title: cut(title.trim(), 60),
            tool: tool.into(),
            call_id: call_id.into(),
            normalized: normalize(text),
        }
    }

    /// The text as it is matched (normalized), for a store that keeps sources for later calls.
    pub fn normalized(&self) -> &str {
        &self.normalized
    }

    /// A source as a store kept it: its described parts and its normalized text
    /// ([`UntrustedSource::normalized`]), which is normalized again (normalizing is idempotent).
    pub fn restored(mut self, normalized: &str) -> Self {
        self.normalized = normalize(normalized);
        self
    }

    /// How a person is told where a value came from.
    pub fn describe(&self) -> String {
        if self.title.is_empty() {
            format!("{}, read by `{}`", self.origin, self.tool)
        } else {
            format!(
                "'{}' ({}, read by `{}`)",
                self.title, self.origin, self.tool
            )
        }
    }
}

/// A text as matching sees it, normalized once ([`normalize`]: lower case, whitespace runs as
/// one space) and cheap to share. Only [`NormalizedText::of`] makes one, so a text handed to
/// [`TaintSources::add_trusted_normalized`] has been normalized: a session's memory keeps each
/// result this way instead of normalizing every remembered result again at each call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedText(std::sync::Arc<str>);

impl NormalizedText {
    pub fn of(text: &str) -> Self {
        NormalizedText(normalize(text).into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a caller knows of where the conversation's text came from.
#[derive(Debug, Clone, Default)]
pub struct TaintSources {
    user: Vec<String>,
    trusted: Vec<NormalizedText>,
    untrusted: Vec<UntrustedSource>,
}

impl TaintSources {
    pub fn new() -> Self {
        TaintSources::default()
    }

    /// Something the user wrote.
    pub fn add_user(&mut self, text: &str) {
        self.user.push(normalize(text));
    }

    /// The trusted part of one of our tools' results (its structured content, as JSON text).
    pub fn add_trusted(&mut self, text: &str) {
        self.trusted.push(NormalizedText::of(text));
    }

    /// As [`TaintSources::add_trusted`], for a text normalized before (kept by a memory).
    pub fn add_trusted_normalized(&mut self, text: NormalizedText) {
        self.trusted.push(text);
    }

    pub fn add_untrusted(&mut self, source: UntrustedSource) {
        self.untrusted.push(source);
    }

    pub fn has_untrusted(&self) -> bool {
        !self.untrusted.is_empty()
    }

    fn user_wrote(&self, needle: &str) -> bool {
        self.user.iter().any(|t| t.contains(needle))
    }

    fn untrusted_with(&self, needle: &str) -> Option<&UntrustedSource> {
        self.untrusted
            .iter()
            .find(|s| s.normalized.contains(needle))
    }

    fn untrusted_with_token(&self, token: &str) -> Option<&UntrustedSource> {
        self.untrusted
            .iter()
            .find(|s| contains_token(&s.normalized, token))
    }

    fn trusted_with_token(&self, token: &str) -> bool {
        self.trusted
            .iter()
            .any(|t| contains_token(t.as_str(), token))
            || self.user.iter().any(|t| contains_token(t, token))
    }
}

/// One tainted value of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Taint {
    /// Where in the call it is: an argument path (`to`, `tags[1]`) or `preview.<field>` for
    /// what the call will do as read from the store (a draft's recipient).
    pub argument: String,
    /// The tainted value (or the part of it found in untrusted text), quoted and bounded.
    pub value: String,
    /// Where it was found.
    pub source: UntrustedSource,
}

impl Taint {
    /// The plain sentence a person reads before approving.
    pub fn sentence(&self) -> String {
        format!(
            "{} {} comes from {}, not from you",
            what_it_is(&self.argument),
            self.value,
            self.source.describe()
        )
    }
}

/// What the dispatcher does with a tainted call (`[policy]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaintPolicy {
    #[serde(default)]
    pub tainted_high: TaintedHigh,
    #[serde(default)]
    pub tainted_outbound: TaintedOutbound,
}

impl Default for TaintPolicy {
    /// Refuse tainted high-risk calls; ask before a tainted medium outbound call.
    fn default() -> Self {
        TaintPolicy {
            tainted_high: TaintedHigh::Refuse,
            tainted_outbound: TaintedOutbound::Ask,
        }
    }
}

/// A high-risk call with a tainted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintedHigh {
    /// Refused outright, before anyone is asked: a tired person approves what they are shown.
    #[default]
    Refuse,
    /// Asked as any high-risk call, the taint shown in the preview.
    Ask,
}

/// A medium-risk outbound call (a `web_clip`) with a tainted value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintedOutbound {
    /// A human is asked even in `auto` mode.
    #[default]
    Ask,
    /// The mode decides, as for an untainted call.
    Allow,
}

/// Which taint rule acted on a call, as its decision record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintRule {
    /// A tainted high-risk call was refused.
    RefusedTaintedHigh,
    /// A tainted medium outbound call was sent to a human though the mode would not ask.
    AskedTaintedOutbound,
}

impl TaintRule {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintRule::RefusedTaintedHigh => "refused_tainted_high",
            TaintRule::AskedTaintedOutbound => "asked_tainted_outbound",
        }
    }
}

impl TaintPolicy {
    /// Neither rule acts: taint is still found, recorded and shown to the approver.
    pub fn record_only() -> Self {
        TaintPolicy {
            tainted_high: TaintedHigh::Ask,
            tainted_outbound: TaintedOutbound::Allow,
        }
    }

    /// Whether a call must ask a human because of its taint, though its risk and mode do not.
    pub fn forces_approval(&self, risk: Risk, effect: Effect, tainted: bool) -> bool {
        tainted
            && risk == Risk::Medium
            && effect == Effect::Outbound
            && self.tainted_outbound == TaintedOutbound::Ask
    }

    /// Whether a call is refused because of its taint.
    pub fn refuses(&self, risk: Risk, tainted: bool) -> bool {
        tainted && risk == Risk::High && self.tainted_high == TaintedHigh::Refuse
    }
}

/// The tainted values of a call: `arguments`, then `preview` (paths prefixed `preview.`).
/// One entry per (path, value), in path order.
pub fn find_taint(
    arguments: &Value,
    preview: Option<&Value>,
    sources: &TaintSources,
) -> Vec<Taint> {
    let mut found = Vec::new();
    if !sources.has_untrusted() {
        return found;
    }
    walk(arguments, String::new(), sources, &mut found);
    if let Some(preview) = preview {
        walk(preview, "preview".into(), sources, &mut found);
    }
    let mut seen = BTreeSet::new();
    found.retain(|t: &Taint| seen.insert((t.argument.clone(), t.value.clone())));
    found
}

fn walk(value: &Value, path: String, sources: &TaintSources, found: &mut Vec<Taint>) {
    match value {
        Value::String(s) => string_taint(s, &path, sources, found),
        Value::Number(n) => {
            let token = n.to_string();
            if let Some(source) = sources.untrusted_with_token(&token)
                && !sources.trusted_with_token(&token)
            {
                found.push(Taint {
                    argument: path,
                    value: token,
                    source: source.clone(),
                });
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{path}[{i}]"), sources, found);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(item, child, sources, found);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

/// At most one taint per string leaf: the first of its addresses found in untrusted text,
/// else the whole value, else the first run of words of a long value.
fn string_taint(value: &str, path: &str, sources: &TaintSources, found: &mut Vec<Taint>) {
    let normalized = normalize(value);
    let chars = normalized.chars().count();
    let mut candidates: Vec<(String, String)> = indicators(value)
        .into_iter()
        .map(|i| (normalize(&i), i))
        .collect();
    if (MIN_WHOLE_CHARS..=MAX_WHOLE_CHARS).contains(&chars) {
        candidates.push((normalized.clone(), value.trim().to_string()));
    } else if chars > MAX_WHOLE_CHARS {
        let words: Vec<&str> = normalized.split(' ').collect();
        candidates.extend(words.windows(SHINGLE_WORDS).map(|run| {
            let run = run.join(" ");
            (run.clone(), run)
        }));
    }
    for (needle, shown) in candidates {
        if needle.is_empty() || sources.user_wrote(&needle) {
            continue;
        }
        if let Some(source) = sources.untrusted_with(&needle) {
            found.push(Taint {
                argument: path.into(),
                value: cut(&shown, QUOTE_CHARS),
                source: source.clone(),
            });
            return;
        }
    }
}

/// E-mail addresses, URLs and the hosts of both, as written in `text`.
pub fn indicators(text: &str) -> Vec<String> {
    static PATTERNS: OnceLock<Option<(Regex, Regex)>> = OnceLock::new();
    let Some((email, url)) = PATTERNS.get_or_init(|| {
        let email = Regex::new(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)").ok()?;
        let url = Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^/\s@]*@)?([^/\s:?#]+)[^\s]*").ok()?;
        Some((email, url))
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for caps in url.captures_iter(text) {
        out.push(
            caps[0]
                .trim_end_matches(['.', ',', ')', '"', '\''])
                .to_string(),
        );
        out.push(caps[1].to_string());
    }
    for caps in email.captures_iter(text) {
        out.push(caps[0].to_string());
        out.push(caps[1].to_string());
    }
    out
}

/// Lower case, whitespace runs as one space, trimmed. One pass and one allocation for ASCII
/// text (the common case: JSON results); other text is lower-cased by Unicode's rules.
fn normalize(text: &str) -> String {
    let mut joined = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(word);
    }
    if joined.is_ascii() {
        joined.make_ascii_lowercase();
        joined
    } else {
        joined.to_lowercase()
    }
}

/// Whether `token` appears in `text` with no letter or digit on either side.
fn contains_token(text: &str, token: &str) -> bool {
    text.match_indices(token).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

fn what_it_is(path: &str) -> String {
    let leaf = path
        .rsplit('.')
        .next()
        .unwrap_or(path)
        .split('[')
        .next()
        .unwrap_or(path);
    match leaf {
        "to" | "cc" | "bcc" | "recipient" | "recipients" => "the recipient".into(),
        "url" | "urls" | "link" => "the address".into(),
        "note_id" | "note_ids" | "draft_id" | "id" | "ids" => {
            format!("the {}", leaf.replace('_', " "))
        }
        "body" | "text" | "content" => format!("the {leaf}, with"),
        "subject" | "title" => format!("the {leaf}"),
        "tag" | "tags" => "the tag".into(),
        _ => format!("the value of `{path}`"),
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let kept: String = text.chars().take(max).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
#[path = "taint_tests.rs"]
mod tests;
