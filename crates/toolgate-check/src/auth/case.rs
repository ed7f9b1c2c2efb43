//! The authorization suite's case files (the format is documented in [`crate::auth`]): the
//! serde types as written, and [`resolve`], which checks one case whole and turns it into the
//! [`Case`] the suite runs. Pure.
//!
//! Refuses (naming the case and the field): a time that is not `now` followed by `+`/`-` terms
//! of seconds or `leeway`; an unknown `$name`; a claim both set and omitted; an algorithm the
//! signer cannot sign with; a raw token with any JWT field; a block without the rule and
//! status the trace and the server must show; fields that do not belong to the request kind.

use serde::Deserialize;
use serde_json::Value;

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    pub case: Vec<CaseSpec>,
}

/// One case, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub id: String,
    pub category: String,
    /// What the case shows, for the reviewer (optional).
    #[serde(default)]
    pub what: Option<String>,
    pub expect: Expectation,
    #[serde(default)]
    pub request: RequestKind,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub arguments: Option<Value>,
    #[serde(default)]
    pub server: ServerName,
    #[serde(default)]
    pub present: Presentation,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub rule: Option<String>,
    #[serde(default)]
    pub hidden: Vec<String>,
    #[serde(default)]
    pub listed: Vec<String>,
    #[serde(default)]
    pub token: TokenSpec,
}

/// What the case must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    Block,
    Allow,
}

/// The MCP request sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A 2025-11-25 `initialize`.
    Initialize,
    /// A 2026-07-28 `tools/list`.
    List,
    /// A 2026-07-28 `tools/call`.
    #[default]
    Call,
}

/// Which server instance the request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerName {
    #[default]
    Main,
    Second,
}

impl ServerName {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerName::Main => "main",
            ServerName::Second => "second",
        }
    }
}

/// How the token travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presentation {
    /// `Authorization: Bearer <token>`.
    #[default]
    Bearer,
    /// `Authorization: bearer <token>` (the scheme is case-insensitive, RFC 7235).
    LowercaseScheme,
    /// `Authorization: <token>`, no scheme.
    NoScheme,
    /// `Authorization: Basic <token>`.
    Basic,
    /// `?access_token=<token>` in the URL, no header (RFC 6750 section 2.3).
    Query,
    /// Both the query parameter and the header.
    QueryAndHeader,
    /// Two `Authorization: Bearer <token>` headers.
    TwoHeaders,
    /// No token at all.
    None,
}

impl Presentation {
    pub fn as_str(self) -> &'static str {
        match self {
            Presentation::Bearer => "bearer",
            Presentation::LowercaseScheme => "lowercase_scheme",
            Presentation::NoScheme => "no_scheme",
            Presentation::Basic => "basic",
            Presentation::Query => "query",
            Presentation::QueryAndHeader => "query_and_header",
            Presentation::TwoHeaders => "two_headers",
            Presentation::None => "none",
        }
    }
}

/// Who signs the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signer {
    /// The authorization server's published key (kid `suite-key`).
    #[default]
    Right,
    /// A key the authorization server never published (kid `stranger-key`).
    Other,
    /// Nobody: `alg` `none` and an empty signature.
    None,
    /// HMAC with the published key's public JWK (as served) as the secret.
    HmacPublic,
    /// The published key, then the payload is changed (`sub` becomes `mallory`) and the
    /// signature kept.
    Tampered,
}

impl Signer {
    pub fn as_str(self) -> &'static str {
        match self {
            Signer::Right => "right",
            Signer::Other => "other",
            Signer::None => "none",
            Signer::HmacPublic => "hmac_public",
            Signer::Tampered => "tampered",
        }
    }
}

/// `aud` as written: one string or a list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The token, as written: every field optional, defaults make a valid token.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    #[serde(default)]
    pub sign: Signer,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub typ: Option<String>,
    #[serde(default)]
    pub iss: Option<String>,
    #[serde(default)]
    pub aud: Option<Audience>,
    #[serde(default)]
    pub sub: Option<String>,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub exp: Option<String>,
    #[serde(default)]
    pub nbf: Option<String>,
    #[serde(default)]
    pub iat: Option<String>,
    #[serde(default)]
    pub omit: Vec<String>,
    #[serde(default)]
    pub raw: Option<String>,
}

/// The kid of the published key and of the stranger's.
pub const RIGHT_KID: &str = "suite-key";
pub const OTHER_KID: &str = "stranger-key";
/// The default claims of a suite token.
pub const DEFAULT_SUB: &str = "suite-user";
pub const DEFAULT_CLIENT: &str = "suite-client";
pub const DEFAULT_SCOPE: &str = "notes:read notes:write";
/// The tool a call names when the case names none.
pub const DEFAULT_TOOL: &str = "notes_create";

/// The fields `omit` may name.
const OMITTABLE: [&str; 10] = [
    "kid",
    "typ",
    "iss",
    "aud",
    "sub",
    "client_id",
    "scope",
    "exp",
    "nbf",
    "iat",
];

/// The `$names` a string claim may use.
const REFERENCES: [&str; 3] = ["$issuer", "$main", "$second"];

/// A time relative to when the token is made: `now` + `leeway` x `leeways` + `seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeExpr {
    pub leeways: i64,
    pub seconds: i64,
}

impl TimeExpr {
    /// The time in seconds since the epoch, for a token made at `now` against a server whose
    /// leeway is `leeway` seconds (0 when the result would be before the epoch).
    pub fn at(self, now: u64, leeway: u64) -> u64 {
        let offset = self
            .leeways
            .saturating_mul(i64::try_from(leeway).unwrap_or(i64::MAX))
            .saturating_add(self.seconds);
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        u64::try_from(now.saturating_add(offset)).unwrap_or(0)
    }
}

/// Parses `now`, `now+300`, `now-leeway`, `now-leeway+10`, `now+leeway+2` (terms in any order,
/// spaces allowed).
pub fn parse_time(text: &str) -> Result<TimeExpr, String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = || {
        format!(
            "time {text:?} is not `now` followed by +/- terms of seconds or `leeway` \
             (e.g. \"now+300\", \"now-leeway\", \"now+leeway+2\")"
        )
    };
    let mut rest = compact.strip_prefix("now").ok_or_else(bad)?;
    let mut expr = TimeExpr {
        leeways: 0,
        seconds: 0,
    };
    while !rest.is_empty() {
        let sign: i64 = match rest.as_bytes()[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return Err(bad()),
        };
        rest = &rest[1..];
        let end = rest.find(['+', '-']).unwrap_or(rest.len());
        let (term, tail) = rest.split_at(end);
        rest = tail;
        if term == "leeway" {
            expr.leeways += sign;
        } else if !term.is_empty() && term.bytes().all(|b| b.is_ascii_digit()) {
            let seconds: i64 = term.parse().map_err(|_| bad())?;
            if seconds > 10 * 365 * 24 * 3600 {
                return Err(format!("time {text:?}: {seconds} s is more than ten years"));
            }
            expr.seconds += sign * seconds;
        } else {
            return Err(bad());
        }
    }
    Ok(expr)
}

/// A claim's text with its `$names` checked (they are replaced when the token is made).
fn checked_reference(field: &str, text: &str) -> Result<String, String> {
    let mut rest = text.to_string();
    for name in REFERENCES {
        rest = rest.replace(name, "");
    }
    if rest.contains('$') {
        return Err(format!(
            "{field} {text:?} names an unknown $reference (known: {})",
            REFERENCES.join(", ")
        ));
    }
    Ok(text.to_string())
}

/// What is sent as the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenPlan {
    /// This text, as it is.
    Raw(String),
    Jwt(Box<JwtPlan>),
}

/// A JWT to make. Optional fields are left out of the token when `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtPlan {
    pub sign: Signer,
    /// The header's `alg`.
    pub alg: String,
    pub kid: Option<String>,
    pub typ: Option<String>,
    /// Claims as strings, `$names` not yet replaced.
    pub iss: Option<String>,
    pub aud: Option<Audience>,
    pub sub: Option<String>,
    pub client_id: Option<String>,
    pub scope: Option<String>,
    pub exp: Option<TimeExpr>,
    pub nbf: Option<TimeExpr>,
    pub iat: Option<TimeExpr>,
}

/// The request, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Initialize,
    List {
        /// Tools that must not be listed (a block).
        hidden: Vec<String>,
        /// Tools that must be listed (an allow).
        listed: Vec<String>,
    },
    Call {
        tool: String,
        arguments: Value,
    },
}

impl Request {
    pub fn describe(&self) -> String {
        match self {
            Request::Initialize => "initialize".into(),
            Request::List { .. } => "tools/list".into(),
            Request::Call { tool, .. } => format!("tools/call {tool}"),
        }
    }
}

/// One case, checked and ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub id: String,
    pub category: String,
    pub what: Option<String>,
    pub expect: Expectation,
    pub request: Request,
    pub server: ServerName,
    pub present: Presentation,
    /// The HTTP status the server must answer.
    pub status: u16,
    /// For a block: the rule its `auth` trace line must name (`withheld` for a tool kept out
    /// of a list).
    pub rule: Option<String>,
    pub token: TokenPlan,
}

/// The rule a block of a list that withholds tools cites.
pub const WITHHELD: &str = "withheld";

/// Checks `spec` and resolves its defaults; the error names the field.
pub fn resolve(spec: &CaseSpec) -> Result<Case, String> {
    if spec.category.trim().is_empty() {
        return Err("category is empty".into());
    }
    let request = match spec.request {
        RequestKind::Initialize | RequestKind::List if spec.tool.is_some() => {
            return Err("tool is only for request = \"call\"".into());
        }
        RequestKind::Initialize | RequestKind::List if spec.arguments.is_some() => {
            return Err("arguments are only for request = \"call\"".into());
        }
        RequestKind::Initialize | RequestKind::Call
            if !spec.hidden.is_empty() || !spec.listed.is_empty() =>
        {
            return Err("hidden and listed are only for request = \"list\"".into());
        }
        RequestKind::Initialize => Request::Initialize,
        RequestKind::List => Request::List {
            hidden: spec.hidden.clone(),
            listed: spec.listed.clone(),
        },
        RequestKind::Call => {
            let tool = spec.tool.clone().unwrap_or_else(|| DEFAULT_TOOL.into());
            let arguments = match &spec.arguments {
                Some(Value::Object(map)) => Value::Object(map.clone()),
                Some(_) => return Err("arguments must be a table".into()),
                None => default_arguments(&tool, &spec.id).ok_or_else(|| {
                    format!(
                        "tool {tool} has no default arguments: give `arguments` (defaults exist \
                         for notes_create, notes_search and notes_get)"
                    )
                })?,
            };
            Request::Call { tool, arguments }
        }
    };
    match spec.expect {
        Expectation::Allow if !spec.hidden.is_empty() => {
            return Err("hidden is for a block (tools that must not be listed)".into());
        }
        Expectation::Block if !spec.listed.is_empty() => {
            return Err("listed is for an allow (tools that must be listed)".into());
        }
        Expectation::Allow if spec.rule.is_some() => {
            return Err("rule is for a block (the rule its trace line names)".into());
        }
        Expectation::Block if spec.rule.is_none() => {
            return Err("a block needs `rule`, the rule its auth trace line must name".into());
        }
        _ => {}
    }
    let status = match (spec.expect, spec.status) {
        (Expectation::Allow, None) => 200,
        (Expectation::Allow, Some(status)) if (200..300).contains(&status) => status,
        (Expectation::Allow, Some(status)) => {
            return Err(format!("an allow must expect a 2xx status, not {status}"));
        }
        (Expectation::Block, None) => {
            return Err("a block needs `status`, the HTTP status the server must answer".into());
        }
        (Expectation::Block, Some(status)) => status,
    };
    if spec.expect == Expectation::Block {
        let withholds = spec.rule.as_deref() == Some(WITHHELD);
        if withholds == spec.hidden.is_empty() {
            return Err(format!(
                "rule \"{WITHHELD}\" and `hidden` go together: a list that must leave tools out \
                 cites the allow line that withholds them"
            ));
        }
        if withholds && status != 200 {
            return Err(format!(
                "a withheld list is answered 200, not {status} (the tools are left out)"
            ));
        }
        if !withholds && (200..300).contains(&status) {
            return Err(format!(
                "a block must expect a refusal status (400, 401, 403, 503), not {status}"
            ));
        }
    }
    Ok(Case {
        id: spec.id.clone(),
        category: spec.category.clone(),
        what: spec.what.clone(),
        expect: spec.expect,
        request,
        server: spec.server,
        present: spec.present,
        status,
        rule: spec.rule.clone(),
        token: token_plan(&spec.token)?,
    })
}

fn default_arguments(tool: &str, id: &str) -> Option<Value> {
    match tool {
        "notes_create" => Some(serde_json::json!({
            "title": marker(id),
            "body": format!("written by the authorization suite's case {id}"),
        })),
        "notes_search" => Some(serde_json::json!({"query": "auth-suite"})),
        "notes_get" => Some(serde_json::json!({"note_id": 1})),
        _ => None,
    }
}

/// The title a case's `notes_create` writes, looked for in the store afterwards.
pub fn marker(id: &str) -> String {
    format!("auth-suite {id}")
}

fn token_plan(spec: &TokenSpec) -> Result<TokenPlan, String> {
    if let Some(raw) = &spec.raw {
        let anything_else = spec.sign != Signer::Right
            || spec.alg.is_some()
            || spec.kid.is_some()
            || spec.typ.is_some()
            || spec.iss.is_some()
            || spec.aud.is_some()
            || spec.sub.is_some()
            || spec.client_id.is_some()
            || spec.scope.is_some()
            || spec.exp.is_some()
            || spec.nbf.is_some()
            || spec.iat.is_some()
            || !spec.omit.is_empty();
        if anything_else {
            return Err("token.raw is sent as it is: it takes no other token field".into());
        }
        return Ok(TokenPlan::Raw(raw.clone()));
    }
    for name in &spec.omit {
        if !OMITTABLE.contains(&name.as_str()) {
            return Err(format!(
                "token.omit names {name:?}, which is not one of {}",
                OMITTABLE.join(", ")
            ));
        }
    }
    let omitted = |name: &str| spec.omit.iter().any(|o| o == name);
    // A field that is set and omitted at once is a mistake in the case.
    let set = [
        ("kid", spec.kid.is_some()),
        ("typ", spec.typ.is_some()),
        ("iss", spec.iss.is_some()),
        ("aud", spec.aud.is_some()),
        ("sub", spec.sub.is_some()),
        ("client_id", spec.client_id.is_some()),
        ("scope", spec.scope.is_some()),
        ("exp", spec.exp.is_some()),
        ("nbf", spec.nbf.is_some()),
        ("iat", spec.iat.is_some()),
    ];
    if let Some((name, _)) = set.iter().find(|(name, is_set)| *is_set && omitted(name)) {
        return Err(format!("token.{name} is both set and omitted"));
    }
    let alg = match (spec.sign, &spec.alg) {
        (Signer::None, alg) => alg.clone().unwrap_or_else(|| "none".into()),
        (Signer::HmacPublic, None) => "HS256".into(),
        (Signer::HmacPublic, Some(alg)) if ["HS256", "HS384", "HS512"].contains(&alg.as_str()) => {
            alg.clone()
        }
        (Signer::HmacPublic, Some(alg)) => {
            return Err(format!(
                "token.alg {alg:?}: an HMAC signature is HS256, HS384 or HS512"
            ));
        }
        (_, None) => "RS256".into(),
        (_, Some(alg)) if RSA_ALGORITHMS.contains(&alg.as_str()) => alg.clone(),
        (sign, Some(alg)) => {
            return Err(format!(
                "token.alg {alg:?}: the {} signer has an RSA key, which signs {} (use sign = \
                 \"none\" to write any alg unsigned)",
                sign.as_str(),
                RSA_ALGORITHMS.join(", ")
            ));
        }
    };
    let default_kid = match spec.sign {
        Signer::Other => Some(OTHER_KID),
        Signer::None => None,
        Signer::Right | Signer::HmacPublic | Signer::Tampered => Some(RIGHT_KID),
    };
    let pick = |name: &str, given: &Option<String>, default: Option<&str>| -> Option<String> {
        if omitted(name) {
            None
        } else {
            given.clone().or_else(|| default.map(str::to_string))
        }
    };
    let time = |name: &str, given: &Option<String>, default: Option<TimeExpr>| {
        if omitted(name) {
            return Ok(None);
        }
        match given {
            Some(text) => parse_time(text)
                .map(Some)
                .map_err(|e| format!("token.{name}: {e}")),
            None => Ok(default),
        }
    };
    let iss = pick("iss", &spec.iss, Some("$issuer"))
        .map(|t| checked_reference("token.iss", &t))
        .transpose()?;
    let aud = if omitted("aud") {
        None
    } else {
        let aud = spec
            .aud
            .clone()
            .unwrap_or_else(|| Audience::One("$main".into()));
        match &aud {
            Audience::One(one) => {
                checked_reference("token.aud", one)?;
            }
            Audience::Many(many) => {
                for one in many {
                    checked_reference("token.aud", one)?;
                }
            }
        }
        Some(aud)
    };
    Ok(TokenPlan::Jwt(Box::new(JwtPlan {
        sign: spec.sign,
        alg,
        kid: pick("kid", &spec.kid, default_kid),
        typ: pick("typ", &spec.typ, Some("at+jwt")),
        iss,
        aud,
        sub: pick("sub", &spec.sub, Some(DEFAULT_SUB)),
        client_id: pick("client_id", &spec.client_id, Some(DEFAULT_CLIENT)),
        scope: pick("scope", &spec.scope, Some(DEFAULT_SCOPE)),
        exp: time(
            "exp",
            &spec.exp,
            Some(TimeExpr {
                leeways: 0,
                seconds: 300,
            }),
        )?,
        nbf: time("nbf", &spec.nbf, None)?,
        iat: time(
            "iat",
            &spec.iat,
            Some(TimeExpr {
                leeways: 0,
                seconds: 0,
            }),
        )?,
    })))
}

/// What an RSA key signs.
pub const RSA_ALGORITHMS: [&str; 6] = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"];

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> CaseSpec {
        let file: CaseFile = toml::from_str(text).unwrap();
        file.case.into_iter().next().unwrap()
    }

    const ALLOW: &str = "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"allow\"\n";
    const BLOCK: &str = "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nstatus = 401\nrule = \"expired\"\n";

    #[test]
    fn times_are_now_plus_or_minus_seconds_and_leeways() {
        let ok = [
            ("now", 0, 0),
            ("now+300", 0, 300),
            ("now-leeway", -1, 0),
            ("now - leeway + 10", -1, 10),
            ("now+leeway+2", 1, 2),
            ("now-3600", 0, -3600),
            ("now+leeway+leeway", 2, 0),
        ];
        for (text, leeways, seconds) in ok {
            assert_eq!(
                parse_time(text),
                Ok(TimeExpr { leeways, seconds }),
                "{text}"
            );
        }
        for bad in [
            "",
            "300",
            "now+",
            "now+x",
            "now*2",
            "tomorrow",
            "now+1e3",
            "now++1",
            "now+99999999999",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_time_is_resolved_against_the_servers_leeway() {
        let edge = parse_time("now-leeway").unwrap();
        assert_eq!(edge.at(1_000, 60), 940);
        assert_eq!(parse_time("now+leeway+2").unwrap().at(1_000, 60), 1_062);
        assert_eq!(parse_time("now-leeway").unwrap().at(1_000, 0), 1_000);
        assert_eq!(parse_time("now-5000").unwrap().at(1_000, 0), 0);
    }

    #[test]
    fn a_default_case_is_a_valid_token_calling_notes_create_on_main() {
        let case = resolve(&spec(ALLOW)).unwrap();
        assert_eq!(case.status, 200);
        assert_eq!(case.server, ServerName::Main);
        assert_eq!(case.present, Presentation::Bearer);
        let Request::Call { tool, arguments } = &case.request else {
            panic!("{case:?}")
        };
        assert_eq!(tool, "notes_create");
        assert_eq!(arguments["title"], marker("a"));
        let TokenPlan::Jwt(jwt) = &case.token else {
            panic!("{case:?}")
        };
        assert_eq!(
            (jwt.alg.as_str(), jwt.kid.as_deref(), jwt.typ.as_deref()),
            ("RS256", Some(RIGHT_KID), Some("at+jwt"))
        );
        assert_eq!(jwt.iss.as_deref(), Some("$issuer"));
        assert_eq!(jwt.aud, Some(Audience::One("$main".into())));
        assert_eq!(jwt.nbf, None);
    }

    #[test]
    fn omitted_fields_are_left_out_and_signers_pick_their_own_defaults() {
        let case = resolve(&spec(&format!(
            "{BLOCK}[case.token]\nsign = \"other\"\nomit = [\"exp\", \"typ\"]\n"
        )))
        .unwrap();
        let TokenPlan::Jwt(jwt) = case.token else {
            panic!()
        };
        assert_eq!(
            (jwt.exp, jwt.typ, jwt.kid.as_deref()),
            (None, None, Some(OTHER_KID))
        );
        let none = resolve(&spec(&format!("{BLOCK}[case.token]\nsign = \"none\"\n"))).unwrap();
        let TokenPlan::Jwt(jwt) = none.token else {
            panic!()
        };
        assert_eq!((jwt.alg.as_str(), jwt.kid), ("none", None));
    }

    #[test]
    fn mistakes_in_a_case_are_refused_naming_the_field() {
        let cases = [
            (format!("{BLOCK}[case.token]\nexp = \"tomorrow\"\n"), "token.exp"),
            (format!("{BLOCK}[case.token]\niss = \"$isuer\"\n"), "$reference"),
            (
                format!("{BLOCK}[case.token]\nexp = \"now\"\nomit = [\"exp\"]\n"),
                "both set and omitted",
            ),
            (format!("{BLOCK}[case.token]\nomit = [\"jti\"]\n"), "token.omit"),
            (format!("{BLOCK}[case.token]\nalg = \"ES256\"\n"), "RSA key"),
            (
                format!("{BLOCK}[case.token]\nsign = \"hmac_public\"\nalg = \"RS256\"\n"),
                "HMAC",
            ),
            (
                format!("{BLOCK}[case.token]\nraw = \"x\"\nscope = \"a\"\n"),
                "token.raw",
            ),
            (
                "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nstatus = 401\n"
                    .to_string(),
                "needs `rule`",
            ),
            (
                "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nrule = \"x\"\n"
                    .to_string(),
                "needs `status`",
            ),
            (format!("{ALLOW}rule = \"expired\"\n"), "rule is for a block"),
            (format!("{ALLOW}status = 401\n"), "2xx"),
            (format!("{BLOCK}request = \"list\"\ntool = \"x\"\n"), "tool is only"),
            (format!("{ALLOW}hidden = [\"x\"]\n"), "hidden and listed"),
            (
                format!("{ALLOW}tool = \"notes_delete\"\n"),
                "no default arguments",
            ),
            (
                "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nstatus = 200\nrule = \"expired\"\n"
                    .to_string(),
                "refusal status",
            ),
            (
                "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nrequest = \"list\"\nstatus = 401\nrule = \"withheld\"\n"
                    .to_string(),
                "go together",
            ),
        ];
        for (text, needle) in cases {
            let err = resolve(&spec(&text)).unwrap_err();
            assert!(err.contains(needle), "{text}\n=> {err}");
        }
    }

    #[test]
    fn a_list_that_must_withhold_a_tool_cites_the_withheld_rule_with_200() {
        let text = "[[case]]\nid = \"a\"\ncategory = \"c\"\nexpect = \"block\"\nrequest = \"list\"\nstatus = 200\nrule = \"withheld\"\nhidden = [\"notes_create\"]\n";
        let case = resolve(&spec(text)).unwrap();
        assert_eq!(
            case.request,
            Request::List {
                hidden: vec!["notes_create".into()],
                listed: vec![]
            }
        );
    }

    #[test]
    fn unknown_fields_are_refused_by_the_file_type() {
        let text = format!("{ALLOW}[case.token]\nsignature = \"x\"\n");
        assert!(toml::from_str::<CaseFile>(&text).is_err());
        let text = format!("{ALLOW}present = \"cookie\"\n");
        assert!(toml::from_str::<CaseFile>(&text).is_err());
    }
}
