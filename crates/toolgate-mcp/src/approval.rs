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
//!
//! A question a server behind us asks during a call ([`toolgate_core::question`]) reaches a
//! 2025-11-25 host the same way, as an `elicitation/create` of its own: the server's form
//! as it asked for it, our message naming the server and quoting its words
//! ([`forwarded_question`]); a URL only to a host that declared it opens URLs. The host's
//! answer goes back to that server alone.

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
    Asked, QuestionAnswer, QuestionRefused, ServerQuestion,
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

    fn ask<'a>(
        &'a self,
        question: &'a ServerQuestion,
    ) -> BoxFuture<'a, Result<QuestionAnswer, QuestionRefused>> {
        Box::pin(self.forward(question))
    }
}

impl Eliciting {
    /// The question a server behind us asks, put to our host's person: the form is the
    /// server's, the message says whose it is; a URL only when the host opens URLs.
    async fn forward(&self, question: &ServerQuestion) -> Result<QuestionAnswer, QuestionRefused> {
        let params = forwarded_question(question, self.host_opens_urls())?;
        let result = self
            .peer
            .create_elicitation(params)
            .await
            .map_err(|e| QuestionRefused::Unavailable(e.to_string()))?;
        Ok(answer_of(result))
    }

    fn host_opens_urls(&self) -> bool {
        self.peer.peer_info().is_some_and(|info| {
            info.capabilities
                .elicitation
                .as_ref()
                .is_some_and(|caps| caps.url.is_some())
        })
    }
}

/// The elicitation we send our host for `question`: its form as the server asked for it, or
/// its URL when the host opens URLs; the message is ours, naming the server and quoting it.
pub fn forwarded_question(
    question: &ServerQuestion,
    host_opens_urls: bool,
) -> Result<ElicitRequestParams, QuestionRefused> {
    match &question.asked {
        Asked::Form { schema } => {
            let requested_schema: ElicitationSchema = serde_json::from_value(schema.clone())
                .map_err(|e| QuestionRefused::NotShown(format!("the server's form: {e}")))?;
            Ok(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: question.describe(),
                requested_schema,
            })
        }
        Asked::Url { url } if host_opens_urls => Ok(ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message: question.describe(),
            url: url.clone(),
            elicitation_id: String::new(),
        }),
        Asked::Url { .. } => Err(QuestionRefused::NotShown(
            "the host did not declare that it opens URLs".into(),
        )),
    }
}

/// The host's answer as the server is given it: content only with an accept, an object only.
fn answer_of(result: ElicitResult) -> QuestionAnswer {
    match result.action {
        ElicitationAction::Accept => QuestionAnswer::Accept(match result.content {
            Some(serde_json::Value::Object(content)) => content,
            _ => serde_json::Map::new(),
        }),
        ElicitationAction::Cancel => QuestionAnswer::Cancel,
        // Decline, and an action this server does not know: nothing is accepted for anyone.
        _ => QuestionAnswer::Decline,
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

    fn servers_question(asked: Asked) -> ServerQuestion {
        ServerQuestion {
            server: "files".into(),
            message: "\u{1b}]0;toolgate\u{7}Approve everything".into(),
            asked,
        }
    }

    #[test]
    fn a_servers_form_reaches_the_host_as_asked_under_our_framing() {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let sent = forwarded_question(&servers_question(Asked::Form { schema }), false).unwrap();
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = sent
        else {
            panic!("not a form: {sent:?}");
        };
        assert!(
            message.starts_with("The MCP server `files` asks you"),
            "{message}"
        );
        assert!(
            !message.contains('\u{1b}') && !message.contains('\u{7}'),
            "{message}"
        );
        let schema = serde_json::to_value(requested_schema).unwrap();
        assert_eq!(schema["properties"]["name"]["type"], "string");
        assert_eq!(schema["required"], json!(["name"]));
    }

    #[test]
    fn a_url_goes_only_to_a_host_that_opens_urls() {
        let asked = || Asked::Url {
            url: "https://files.example/consent".into(),
        };
        assert!(matches!(
            forwarded_question(&servers_question(asked()), true),
            Ok(ElicitRequestParams::UrlElicitationParams { ref url, .. }) if url == "https://files.example/consent"
        ));
        assert!(matches!(
            forwarded_question(&servers_question(asked()), false),
            Err(QuestionRefused::NotShown(_))
        ));
    }

    #[test]
    fn a_form_that_is_not_a_flat_object_is_not_shown() {
        let schema = json!({"type": "object", "properties": {"nested": {"type": "object"}}});
        assert!(matches!(
            forwarded_question(&servers_question(Asked::Form { schema }), false),
            Err(QuestionRefused::NotShown(_))
        ));
    }

    #[test]
    fn only_an_accept_carries_content_back_to_the_server() {
        let content = json!({"name": "Ada"});
        let cases = [
            (
                ElicitationAction::Accept,
                Some(content.clone()),
                QuestionAnswer::Accept(content.as_object().unwrap().clone()),
            ),
            (
                ElicitationAction::Accept,
                Some(json!("not an object")),
                QuestionAnswer::Accept(serde_json::Map::new()),
            ),
            (
                ElicitationAction::Decline,
                Some(content.clone()),
                QuestionAnswer::Decline,
            ),
            (
                ElicitationAction::Cancel,
                Some(content),
                QuestionAnswer::Cancel,
            ),
        ];
        for (action, content, expected) in cases {
            let mut result = ElicitResult::new(action);
            result.content = content;
            assert_eq!(answer_of(result), expected);
        }
    }
}
