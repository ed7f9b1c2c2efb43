//! Approvals asked of the person at the host, through the protocol. The server never trusts a
//! host to have asked: a call that needs a human runs only on an answer that the dispatcher
//! redeems against the call's own binding (tool, version, canonical arguments, principal),
//! once.
//!
//! - 2026-07-28: the call is answered `input_required` with an elicitation form whose message
//!   is the exact preview ([`ApprovalRequest::describe`]), and `requestState` is the
//!   dispatcher's ticket token. The retry carries the answer; the token is only a lookup key:
//!   the dispatcher recomputes the binding from the resent arguments, so an answer sent with
//!   other arguments, replayed, forged, or past its time runs nothing.
//! - 2025-11-25: the server sends `elicitation/create` with the same text and waits for the
//!   answer within the dispatcher's approval timeout.
//! - A client that did not declare elicitation, or declared only URL mode, gets no channel
//!   here: with the console's inbox configured it is sent there ([`crate::inbox`]), else the
//!   call is `approval_denied`. Which of these a client gets is [`host_path`].
//!
//! Only an `accept` whose form says `approve: true` approves; decline, cancel, a missing or
//! malformed answer all deny.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer};
use toolgate_core::tool::BoxFuture;
use toolgate_core::{
    ApprovalAnswer, ApprovalChannel, ApprovalRequest, ApprovalTicket, Approver, ApproverError,
};

/// The key of our question in `inputRequests` / `inputResponses`.
pub const APPROVAL_INPUT: &str = "approval";

/// How a host's call reaches a person, by what its client declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPath {
    /// The host shows the person a form: the protocol's own question (today's path).
    Form,
    /// The host opens a URL but shows no form: the person is sent to the inbox ticket's page.
    Url,
    /// The host can ask nobody: the call waits in the inbox.
    Inbox,
    /// Nobody can be asked: the call is denied.
    Nobody,
}

/// The path of a call from a client that declared `elicitation` (none: not declared), when
/// the console's inbox is configured (`inbox`) or not. `elicitation: {}` names neither mode
/// and means form (2025-11-25, for clients of earlier revisions).
pub fn host_path(elicitation: Option<&ElicitationCapability>, inbox: bool) -> HostPath {
    let (form, url) = match elicitation {
        None => (false, false),
        Some(caps) if caps.form.is_none() && caps.url.is_none() => (true, false),
        Some(caps) => (caps.form.is_some(), caps.url.is_some()),
    };
    match (form, url, inbox) {
        (true, _, _) => HostPath::Form,
        (false, true, true) => HostPath::Url,
        (false, false, true) => HostPath::Inbox,
        (false, _, false) => HostPath::Nobody,
    }
}

/// The channel for a call from `ctx`: tickets on 2026-07-28, a live question on older
/// revisions, none when the client cannot ask its user.
pub fn channel_for(ctx: &RequestContext<RoleServer>) -> ApprovalChannel {
    let can_ask = ctx
        .client_capabilities()
        .is_some_and(|caps| caps.elicitation.is_some());
    if !can_ask {
        return ApprovalChannel::None;
    }
    if is_modern(ctx) {
        ApprovalChannel::Ticket
    } else {
        ApprovalChannel::Ask(Arc::new(Eliciting {
            peer: ctx.peer.clone(),
        }))
    }
}

/// Whether the request speaks 2026-07-28 or later (multi round-trip requests, cache hints).
pub fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// The `input_required` result that asks for `ticket`'s approval.
pub fn question(ticket: &ApprovalTicket) -> Result<InputRequiredResult, ErrorData> {
    let request = ElicitRequest::new(form(&ticket.request)?);
    let mut requests = InputRequests::new();
    requests.insert(APPROVAL_INPUT.into(), InputRequest::Elicitation(request));
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(ticket.token.clone()),
    ))
}

/// The answer a retried call carries: the ticket token it names and whether the person
/// approved. `None` when the call carries no ticket (a first call).
pub fn answer(params: &CallToolRequestParams) -> Option<(String, bool)> {
    let token = params.request_state.clone()?;
    let approved = params
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(APPROVAL_INPUT))
        .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
        .is_some_and(|result| approves(&result));
    Some((token, approved))
}

/// What the host's person did with the question a retried call answers (its action), when the
/// retry carries an answer that parses.
pub fn host_action(params: &CallToolRequestParams) -> Option<ElicitationAction> {
    params
        .input_responses
        .as_ref()
        .and_then(|responses| responses.get(APPROVAL_INPUT))
        .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
        .map(|result| result.action)
}

fn approves(result: &ElicitResult) -> bool {
    result.action == ElicitationAction::Accept
        && result
            .content
            .as_ref()
            .and_then(|content| content.get("approve"))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
}

fn form(request: &ApprovalRequest) -> Result<ElicitRequestParams, ErrorData> {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approve", |b| {
            b.title("Approve this exact call")
                .description("Only this call, with exactly these arguments, once.")
        })
        .build()
        .map_err(|e| ErrorData::internal_error(format!("approval form: {e}"), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: request.describe(),
        requested_schema: schema,
    })
}

/// Asks over an open 2025-11-25 session with `elicitation/create`.
struct Eliciting {
    peer: Peer<RoleServer>,
}

impl Approver for Eliciting {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move {
            let params = form(request).map_err(|e| ApproverError::Unavailable(e.message.into()))?;
            // The dispatcher bounds the wait with its approval timeout.
            let result = self
                .peer
                .create_elicitation(params)
                .await
                .map_err(|e| ApproverError::Unavailable(e.to_string()))?;
            if approves(&result) {
                Ok(ApprovalAnswer::Approve)
            } else {
                Ok(ApprovalAnswer::Deny {
                    reason: format!(
                        "the person at the host did not approve ({})",
                        action_name(&result.action)
                    ),
                })
            }
        })
    }
}

pub(crate) fn action_name(action: &ElicitationAction) -> &'static str {
    match action {
        ElicitationAction::Accept => "accepted without approving",
        ElicitationAction::Decline => "declined",
        ElicitationAction::Cancel => "cancelled",
        // rmcp's enum is non-exhaustive; a future action is not an approval either.
        _ => "answered with an action this server does not know",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn retry(state: Option<&str>, response: Option<serde_json::Value>) -> CallToolRequestParams {
        let mut params = CallToolRequestParams::new("email_send");
        params.request_state = state.map(str::to_string);
        params.input_responses = response.map(|r| {
            let mut map = rmcp::model::InputResponses::new();
            map.insert(APPROVAL_INPUT.into(), r);
            map
        });
        params
    }

    #[test]
    fn a_host_that_shows_forms_keeps_its_path_and_one_that_opens_urls_is_sent_to_the_inbox() {
        use rmcp::model::{FormElicitationCapability, UrlElicitationCapability};
        let form = || Some(FormElicitationCapability::default());
        let url = || Some(UrlElicitationCapability::default());
        let caps = |form: Option<FormElicitationCapability>, url| {
            let mut caps = ElicitationCapability::new();
            caps.form = form;
            caps.url = url;
            Some(caps)
        };
        let cases = [
            ("no elicitation, no inbox", None, false, HostPath::Nobody),
            ("no elicitation, an inbox", None, true, HostPath::Inbox),
            (
                "elicitation: {} is form",
                caps(None, None),
                true,
                HostPath::Form,
            ),
            ("form only", caps(form(), None), true, HostPath::Form),
            (
                "form and url keep the form",
                caps(form(), url()),
                true,
                HostPath::Form,
            ),
            ("url only, an inbox", caps(None, url()), true, HostPath::Url),
            (
                "url only, no inbox",
                caps(None, url()),
                false,
                HostPath::Nobody,
            ),
            (
                "form only, no inbox",
                caps(form(), None),
                false,
                HostPath::Form,
            ),
        ];
        for (label, declared, inbox, want) in cases {
            assert_eq!(host_path(declared.as_ref(), inbox), want, "{label}");
        }
    }

    #[test]
    fn only_an_accepted_form_saying_approve_approves() {
        let cases = [
            (
                json!({"action": "accept", "content": {"approve": true}}),
                true,
            ),
            (
                json!({"action": "accept", "content": {"approve": false}}),
                false,
            ),
            (
                json!({"action": "accept", "content": {"approve": "yes"}}),
                false,
            ),
            (json!({"action": "accept"}), false),
            (json!({"action": "decline"}), false),
            (
                json!({"action": "cancel", "content": {"approve": true}}),
                false,
            ),
            (json!({"approve": true}), false),
            (json!("yes"), false),
        ];
        for (response, approved) in cases {
            assert_eq!(
                answer(&retry(Some("t"), Some(response.clone()))),
                Some(("t".to_string(), approved)),
                "{response}"
            );
        }
    }

    #[test]
    fn an_answer_without_its_ticket_is_no_answer() {
        let accepted = json!({"action": "accept", "content": {"approve": true}});
        assert_eq!(answer(&retry(None, Some(accepted))), None);
    }

    #[test]
    fn a_ticket_without_an_answer_is_a_refusal() {
        assert_eq!(
            answer(&retry(Some("t"), None)),
            Some(("t".to_string(), false))
        );
    }

    fn hidden_line_draft() -> ApprovalRequest {
        ApprovalRequest {
            binding: "b".into(),
            tool: "email_send".into(),
            version: 1,
            risk: toolgate_core::Risk::High,
            reason: "It sends mail to other people and cannot be undone.".into(),
            effect: toolgate_core::Effect::Irreversible,
            arguments: json!({"draft_id": 7}),
            preview: Some(json!({
                "to": "ann@example.org\u{202e}gro.elpmaxe@eve",
                "subject": "Friday",
                "body": "SECRET: the merger closes Monday\n\u{1b}[1A\u{1b}[2K| See you Friday.",
            })),
            principal: "me".into(),
            taint: Vec::new(),
        }
    }

    #[test]
    fn the_elicitation_message_shows_every_character_of_what_will_be_sent() {
        let request = hidden_line_draft();
        let ElicitRequestParams::FormElicitationParams { message, .. } = form(&request).unwrap()
        else {
            panic!("an approval is a form");
        };
        assert!(
            message.contains(
                "    | SECRET: the merger closes Monday\n    | <ESC>[1A<ESC>[2K| See you Friday."
            ),
            "{message}"
        );
        assert!(
            message.contains("to: ann@example.org<U+202E>gro.elpmaxe@eve"),
            "{message}"
        );
        assert!(!message.contains(['\u{1b}', '\u{202e}']), "{message:?}");
        // The same text in the 2026-07-28 question a ticket is asked with.
        let ticket = ApprovalTicket {
            token: "t".into(),
            request,
            expires_at_unix: 0,
        };
        let sent = serde_json::to_string(&question(&ticket).unwrap()).unwrap();
        assert!(sent.contains("<ESC>[1A<ESC>[2K"), "{sent}");
        assert!(
            !sent.contains("\\u001b") && !sent.contains('\u{202e}'),
            "{sent}"
        );
    }
}
