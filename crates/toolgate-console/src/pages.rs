//! The console's pages, rendered on the server from the templates beside this file, and the
//! response every page goes out in.
//!
//! Contract:
//! - Every value is HTML-escaped: tickets hold text an attacker may have written (arguments,
//!   note bodies, email bodies). Escaping is minijinja's auto-escape, forced on for every
//!   template whatever its name; no template marks anything `safe`.
//! - Pages need no script: the Content-Security-Policy header forbids every script, style from
//!   anywhere but the page itself, framing by any page, and forms posting anywhere but here.
//! - One layout for every page (same look), headings per section, tables with captions and
//!   `scope`d headers, every form field with a `<label>`; decisions are plain forms.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use minijinja::{AutoEscape, Environment};
use serde::Serialize;
use toolgate_core::approval::InboxTicket;

/// What every page may do: nothing but show itself and post its forms here.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
                       form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const TEMPLATES: [(&str, &str); 7] = [
    ("layout.html", include_str!("templates/layout.html")),
    ("audit.html", include_str!("templates/audit.html")),
    ("call.html", include_str!("templates/call.html")),
    ("signin.html", include_str!("templates/signin.html")),
    ("message.html", include_str!("templates/message.html")),
    ("inbox.html", include_str!("templates/inbox.html")),
    ("ticket.html", include_str!("templates/ticket.html")),
];

/// The templates, loaded once.
#[derive(Clone)]
pub struct Templates {
    env: Arc<Environment<'static>>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Templates")
    }
}

/// Why the templates could not be loaded (a defect in a template, caught by the tests).
#[derive(Debug, thiserror::Error)]
#[error("a console template is invalid: {0}")]
pub struct TemplateError(String);

impl Templates {
    pub fn load() -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        // Forced for every template, whatever its name: nothing a call carries is markup.
        env.set_auto_escape_callback(|_| AutoEscape::Html);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .map_err(|e| TemplateError(e.to_string()))?;
        }
        Ok(Templates { env: Arc::new(env) })
    }

    /// `name` rendered with `context`, sent with `status`.
    pub fn page(
        &self,
        status: StatusCode,
        name: &str,
        context: impl Serialize,
    ) -> Response<Full<Bytes>> {
        match self.env.get_template(name).and_then(|t| t.render(context)) {
            Ok(html) => html_response(status, html),
            Err(_) => html_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "<!doctype html><title>Error</title><p>The page could not be rendered.</p>".into(),
            ),
        }
    }

    /// A page that says one thing (a refusal, an error), with `status`.
    pub fn message(
        &self,
        status: StatusCode,
        heading: &str,
        message: &str,
        signed_in: Option<(&str, &str)>,
    ) -> Response<Full<Bytes>> {
        let (who, csrf) = signed_in.unwrap_or_default();
        self.page(
            status,
            "message.html",
            minijinja::context! { heading, message, who, csrf },
        )
    }
}

/// An HTML response with the console's headers.
pub fn html_response(status: StatusCode, html: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(html)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure_headers(headers);
    response
}

/// A redirect (303: the next request is a GET) to `location`.
pub fn see_other(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(http::header::LOCATION, value);
    }
    secure_headers(response.headers_mut());
    response
}

fn secure_headers(headers: &mut http::HeaderMap) {
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        http::header::REFERRER_POLICY,
        // Not `no-referrer`: under it a browser sends `Origin: null` with the console's own
        // form posts, and the origin check would refuse them.
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// One line of the inbox.
#[derive(Debug, Serialize)]
pub struct InboxLine {
    pub token: String,
    pub tool: String,
    pub requester: String,
    pub risk: &'static str,
    pub opened: String,
    pub expires: String,
    pub tainted: bool,
}

impl InboxLine {
    pub fn of(ticket: &InboxTicket) -> Self {
        InboxLine {
            token: ticket.token.clone(),
            tool: ticket.request.tool.clone(),
            requester: requester(ticket),
            risk: ticket.request.risk.as_str(),
            opened: utc(ticket.opened_at_unix),
            expires: utc(ticket.expires_at_unix),
            tainted: !ticket.request.taint.is_empty(),
        }
    }
}

/// One field of what will happen.
#[derive(Debug, Serialize)]
pub struct Field {
    pub name: String,
    pub value: String,
}

/// A ticket's page.
#[derive(Debug, Serialize)]
pub struct TicketView {
    pub token: String,
    pub binding: String,
    pub tool: String,
    pub version: u32,
    pub requester: String,
    pub client: String,
    pub risk: &'static str,
    pub effect: &'static str,
    pub reason: String,
    pub expires: String,
    pub state: String,
    pub taint: Vec<String>,
    pub preview: Vec<Field>,
    pub arguments: String,
    pub described: String,
    pub open: bool,
}

impl TicketView {
    /// The ticket's page: `client` is the MCP client the call came from, as the ledger noted
    /// it (`None`: the host named none, or the store could not say).
    pub fn of(ticket: &InboxTicket, now_unix: i64, client: Option<&str>) -> Self {
        let request = &ticket.request;
        let (state, open) = match (&ticket.decision, ticket.used_at_unix) {
            (Some(d), _) => (
                format!(
                    "{} by {} at {}{}",
                    if d.approved { "approved" } else { "declined" },
                    who_of(&d.decided_by),
                    utc(d.decided_at_unix),
                    if d.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", d.reason)
                    }
                ),
                false,
            ),
            (None, Some(_)) => (
                "closed: the call no longer waits (expired or answered elsewhere)".into(),
                false,
            ),
            (None, None) if now_unix >= ticket.expires_at_unix => {
                ("expired: declined".into(), false)
            }
            (None, None) => ("waiting for a person".into(), true),
        };
        let preview = match &request.preview {
            Some(serde_json::Value::Object(fields)) => fields
                .iter()
                .map(|(name, value)| Field {
                    name: name.clone(),
                    value: match value {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                })
                .collect(),
            _ => Vec::new(),
        };
        TicketView {
            token: ticket.token.clone(),
            binding: ticket.binding.clone(),
            tool: request.tool.clone(),
            version: request.version,
            requester: requester(ticket),
            client: client.map_or_else(
                || "not named: the host gave no client name".to_string(),
                str::to_string,
            ),
            risk: request.risk.as_str(),
            effect: request.effect.as_str(),
            reason: request.reason.clone(),
            expires: utc(ticket.expires_at_unix),
            state,
            taint: request.taint.iter().map(|t| t.sentence()).collect(),
            preview,
            arguments: serde_json::to_string_pretty(&request.arguments).unwrap_or_default(),
            described: request.describe(),
            open,
        }
    }
}

/// Who asked: the principal's id and, when the holder names it, the issuer.
fn requester(ticket: &InboxTicket) -> String {
    who_of(&ticket.holder)
}

/// A holder (`["tenant","id"]`) in words: `id (tenant)`.
pub fn who_of(holder: &str) -> String {
    match serde_json::from_str::<(String, String)>(holder) {
        Ok((tenant, id)) => format!("{id} ({tenant})"),
        Err(_) => holder.to_string(),
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = toolgate_core::clock::civil_from_unix_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_load_and_escape_whatever_a_call_carries() {
        let templates = Templates::load().unwrap();
        let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
        let response = templates.message(StatusCode::OK, hostile, hostile, Some((hostile, "t")));
        let headers = response.headers().clone();
        let body = futures_body(response);
        assert!(!body.contains("<script>"), "{body}");
        assert!(!body.contains("<img"), "{body}");
        assert!(body.contains("&lt;script&gt;"), "{body}");
        assert_eq!(headers["content-security-policy"], CSP);
    }

    fn hostile_ticket(decided: bool) -> InboxTicket {
        let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>";
        InboxTicket {
            token: "ab".repeat(16),
            binding: "bind\"><script>".into(),
            holder: format!("[\"iss\",\"{hostile}\"]"),
            request: toolgate_core::ApprovalRequest {
                binding: "b".into(),
                tool: format!("tool{hostile}"),
                version: 1,
                risk: toolgate_core::Risk::High,
                reason: hostile.into(),
                effect: toolgate_core::Effect::Irreversible,
                arguments: serde_json::json!({"body": hostile}),
                preview: Some(serde_json::json!({"to": [hostile], "body": hostile})),
                principal: hostile.into(),
                taint: Vec::new(),
            },
            opened_at_unix: 0,
            expires_at_unix: 100,
            used_at_unix: None,
            decision: decided.then(|| toolgate_core::approval::HumanDecision {
                decided_by: format!("[\"iss\",\"{hostile}\"]"),
                approved: false,
                reason: hostile.into(),
                decided_at_unix: 5,
            }),
        }
    }

    #[test]
    fn no_value_of_a_ticket_becomes_markup_in_the_inbox_or_its_page() {
        let templates = Templates::load().unwrap();
        for decided in [false, true] {
            let ticket = hostile_ticket(decided);
            let pages = [
                templates.page(
                    StatusCode::OK,
                    "ticket.html",
                    minijinja::context! { t => TicketView::of(&ticket, 10, Some("<img src=x onerror=alert(1)>")), who => "<b>", csrf => "\"><script>" },
                ),
                templates.page(
                    StatusCode::OK,
                    "inbox.html",
                    minijinja::context! { tickets => vec![InboxLine::of(&ticket)], who => "w", csrf => "c" },
                ),
            ];
            for page in pages {
                let body = futures_body(page);
                assert!(!body.contains("<script"), "{body}");
                assert!(!body.contains("<img"), "{body}");
                assert!(!body.contains("<b>"), "{body}");
                assert!(body.contains("&lt;script&gt;alert(1)"), "{body}");
            }
        }
    }

    #[test]
    fn a_time_is_shown_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_461_200), "2026-12-05 09:00:00 UTC");
    }

    fn futures_body(response: Response<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = runtime
            .block_on(response.into_body().collect())
            .unwrap()
            .to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }
}
