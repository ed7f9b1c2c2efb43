//! Telling people that a call waits in the approval inbox: a signed webhook and an email.
//!
//! Guarantees: what is sent is [`TicketOpened`] only (tool, risk, who asked, from which client,
//! the ticket's page, its expiry): never the arguments, the preview or a secret. The webhook
//! leaves only through the egress exit (its allowlist, address and redirect rules apply; a
//! refused destination is never contacted) and carries [`SIGNATURE_HEADER`]:
//! `t=UNIX,v1=HEX`, the HMAC-SHA256 under the configured secret of `UNIX.BODY`, so a receiver
//! checks the body was ours and recent ([`verify`]: a tampered body or signature, another
//! secret, or a timestamp outside the tolerance fails). The email goes through the configured
//! SMTP relay (which the allowlist also governs). Both are best effort: the inbox sends them
//! on their own task and only traces a failure ([`toolgate_core::approval::TicketNotifier`]).
//!
//! The signature format follows the common `t=...,v1=...` webhook convention (as Stripe's) so
//! receivers can reuse their checks; the HMAC itself is the `hmac` crate's.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use toolgate_core::approval::{NotifyError, TicketNotifier, TicketOpened};
use toolgate_core::tool::BoxFuture;
use toolgate_egress::{Egress, EgressError, OutgoingEmail, SmtpRelay};

/// The header that carries the webhook's signature.
pub const SIGNATURE_HEADER: &str = "x-toolgate-signature";

/// How long a receiver should accept a signature after its timestamp, by default.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// How long the webhook may take.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

type HmacSha256 = Hmac<sha2_11::Sha256>;

/// The signature header's value for `body` sent at `unix`, under `secret`.
pub fn sign(secret: &[u8], unix: u64, body: &[u8]) -> String {
    format!(
        "t={unix},v1={}",
        hex(&mac(secret, &signed_text(unix, body)))
    )
}

/// What is signed: the timestamp, a dot, the body.
fn signed_text(unix: u64, body: &[u8]) -> Vec<u8> {
    [unix.to_string().as_bytes(), b".", body].concat()
}

fn mac(secret: &[u8], message: &[u8]) -> Vec<u8> {
    // Any key length is valid for HMAC; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return Vec::new();
    };
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature header is not `t=UNIX,v1=HEX`")]
    Malformed,
    #[error("the signature's timestamp is {age} s from now, outside {tolerance} s")]
    Stale { age: u64, tolerance: u64 },
    #[error("the signature does not match the body")]
    Mismatch,
}

/// Checks `header` (the [`SIGNATURE_HEADER`] value) for `body` under `secret` at `now_unix`,
/// accepting a timestamp at most `tolerance_secs` away: what a receiver runs.
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now_unix: u64,
    tolerance_secs: u64,
) -> Result<(), SignatureError> {
    let mut unix = None;
    let mut given = None;
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => unix = value.parse::<u64>().ok(),
            Some(("v1", value)) => given = decode_hex(value),
            _ => return Err(SignatureError::Malformed),
        }
    }
    let (Some(unix), Some(given)) = (unix, given) else {
        return Err(SignatureError::Malformed);
    };
    let age = now_unix.abs_diff(unix);
    if age > tolerance_secs {
        return Err(SignatureError::Stale {
            age,
            tolerance: tolerance_secs,
        });
    }
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return Err(SignatureError::Mismatch);
    };
    mac.update(&signed_text(unix, body));
    // Constant-time comparison.
    mac.verify_slice(&given)
        .map_err(|_| SignatureError::Mismatch)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// Posts [`TicketOpened`] as JSON to a URL through the egress exit, signed.
pub struct Webhook {
    url: String,
    secret: Vec<u8>,
    egress: Arc<Egress>,
}

impl Webhook {
    /// Posts to `url` through `egress`, signing with `secret`.
    pub fn new(url: &str, secret: &[u8], egress: Arc<Egress>) -> Self {
        Webhook {
            url: url.into(),
            secret: secret.to_vec(),
            egress,
        }
    }

    async fn post(&self, opened: &TicketOpened) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(&serde_json::json!({
            "event": "approval_ticket_opened",
            "ticket": opened,
        }))
        .map_err(|e| NotifyError::Failed(e.to_string()))?;
        let client = self
            .egress
            .session_client(&self.url)
            .await
            .map_err(|e| match e {
                EgressError::Blocked(reason) => NotifyError::Refused(reason.to_string()),
                other => NotifyError::Failed(other.to_string()),
            })?;
        let unix = toolgate_core::clock::unix_secs(std::time::SystemTime::now());
        let answer = client
            .post(&self.url)
            .timeout(WEBHOOK_TIMEOUT)
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, sign(&self.secret, unix, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| NotifyError::Failed(e.to_string()))?;
        if answer.status().is_success() {
            Ok(())
        } else {
            Err(NotifyError::Failed(format!(
                "the webhook answered HTTP {}",
                answer.status().as_u16()
            )))
        }
    }
}

impl TicketNotifier for Webhook {
    fn channel(&self) -> &'static str {
        "webhook"
    }

    fn notify<'a>(&'a self, opened: &'a TicketOpened) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(self.post(opened))
    }
}

/// Mails [`TicketOpened`] in words through the SMTP relay.
pub struct EmailNotice {
    to: Vec<String>,
    relay: Arc<SmtpRelay>,
}

impl EmailNotice {
    pub fn new(to: Vec<String>, relay: Arc<SmtpRelay>) -> Self {
        EmailNotice { to, relay }
    }
}

/// The mail's subject and body: what waits and where, nothing of the call's arguments.
pub fn email_text(opened: &TicketOpened) -> (String, String) {
    let subject = format!("Approval needed: {}", opened.tool);
    let client = opened
        .client
        .as_deref()
        .map(|c| format!(" from {c}"))
        .unwrap_or_default();
    let body = format!(
        "A call of {} ({} risk) by {}{client} waits for a person's approval.\n\n\
         See exactly what it will do, and approve or decline it, at:\n{}\n\n\
         It expires at unix time {}; nobody deciding by then declines it.\n",
        opened.tool,
        opened.risk.as_str(),
        opened.requested_by,
        opened.link,
        opened.expires_at_unix
    );
    (subject, body)
}

impl TicketNotifier for EmailNotice {
    fn channel(&self) -> &'static str {
        "email"
    }

    fn notify<'a>(&'a self, opened: &'a TicketOpened) -> BoxFuture<'a, Result<(), NotifyError>> {
        Box::pin(async move {
            let (subject, body) = email_text(opened);
            let email = OutgoingEmail {
                to: self.to.clone(),
                subject,
                body,
            };
            self.relay
                .send(&email)
                .await
                .map(|_| ())
                .map_err(|e| match e {
                    EgressError::Blocked(reason) => NotifyError::Refused(reason.to_string()),
                    other => NotifyError::Failed(other.to_string()),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"webhook-secret";
    const BODY: &[u8] = br#"{"event":"approval_ticket_opened"}"#;

    #[test]
    fn only_our_unchanged_recent_body_passes_the_signature_check() {
        let header = sign(SECRET, 1_000, BODY);
        let tampered_sig = {
            let mut h = header.clone();
            let last = h.pop().unwrap();
            h.push(if last == '0' { '1' } else { '0' });
            h
        };
        let cases: [(&str, &[u8], &str, &[u8], u64, Result<(), SignatureError>); 8] = [
            ("as sent", SECRET, &header, BODY, 1_010, Ok(())),
            (
                "a changed body",
                SECRET,
                &header,
                br#"{"event":"approval_ticket_opened","x":1}"#,
                1_010,
                Err(SignatureError::Mismatch),
            ),
            (
                "a changed signature",
                SECRET,
                &tampered_sig,
                BODY,
                1_010,
                Err(SignatureError::Mismatch),
            ),
            (
                "another secret",
                b"other",
                &header,
                BODY,
                1_010,
                Err(SignatureError::Mismatch),
            ),
            (
                "a replay long after",
                SECRET,
                &header,
                BODY,
                1_000 + DEFAULT_TOLERANCE_SECS + 1,
                Err(SignatureError::Stale {
                    age: DEFAULT_TOLERANCE_SECS + 1,
                    tolerance: DEFAULT_TOLERANCE_SECS,
                }),
            ),
            (
                "a timestamp moved forward",
                SECRET,
                &header.replace("t=1000", "t=1001"),
                BODY,
                1_010,
                Err(SignatureError::Mismatch),
            ),
            (
                "no timestamp",
                SECRET,
                header.split(',').nth(1).unwrap(),
                BODY,
                1_010,
                Err(SignatureError::Malformed),
            ),
            (
                "not hex",
                SECRET,
                "t=1000,v1=zz",
                BODY,
                1_010,
                Err(SignatureError::Malformed),
            ),
        ];
        for (label, secret, header, body, now, want) in cases {
            assert_eq!(
                verify(secret, header, body, now, DEFAULT_TOLERANCE_SECS),
                want,
                "{label}"
            );
        }
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            hex(&mac(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let header = sign(b"Jefe", 1_700_000_000, b"{}");
        assert_eq!(
            header,
            format!("t=1700000000,v1={}", hex(&mac(b"Jefe", b"1700000000.{}")))
        );
    }

    #[test]
    fn the_mail_names_the_page_and_nothing_else_of_the_call() {
        let opened = TicketOpened {
            tool: "email_send".into(),
            risk: toolgate_core::Risk::High,
            requested_by: "[\"iss\",\"bob\"]".into(),
            client: Some("OAuth client app".into()),
            link: "https://mcp.example.org/console/tickets/abc".into(),
            expires_at_unix: 99,
        };
        let (subject, body) = email_text(&opened);
        assert_eq!(subject, "Approval needed: email_send");
        assert!(
            body.contains("https://mcp.example.org/console/tickets/abc"),
            "{body}"
        );
        assert!(body.contains("OAuth client app"), "{body}");
    }
}
