//! Reaching the console's approval inbox from a host that cannot show the person a form.
//!
//! Which path a call takes is [`approval::host_path`] of what its client declared: a host that
//! shows forms keeps the protocol's own question ([`crate::approval`]); otherwise, with an
//! inbox configured, the call's ticket is opened in the inbox (noting the requesting client:
//! its OAuth `client_id`, else its `clientInfo` name) and a person decides it in the console.
//!
//! - URL mode, 2025-11-25 (`elicitation.url` declared): the server sends `elicitation/create`
//!   with `mode: "url"` naming the ticket's page, waits for the decision while the call waits,
//!   then sends `notifications/elicitation/complete` for that elicitation and answers the call.
//!   A host that answers `decline` or `cancel` ends the wait: the ticket is spent and the call
//!   denied.
//! - URL mode, 2026-07-28: the call is answered `input_required` with a URL elicitation naming
//!   the ticket's page, `requestState` the inbox ticket's token; the retry carrying it waits
//!   for the decision (the spec lets the server block) and runs only on a person's yes. A
//!   retry whose answer is `decline` or `cancel` withdraws the ticket (spent, the call denied at
//!   once), as a 2025-11-25 host's decline does: a no from the requester can only stop a call.
//! - No elicitation at all: the call waits in the inbox silently, as before.
//!
//! Whatever path, a retry whose `requestState` names an inbox ticket is never taken as the
//! host's own answer: only the decision recorded in the inbox approves it, and only for the
//! ticket's own binding and caller ([`InboxApprover::await_decision`]). So a client that learns
//! a ticket's token (it is in the page's URL) cannot approve its own call by sending "approve".
//!
//! The 2025-11-25 call is kept open while the person decides rather than answered with
//! `URLElicitationRequiredError` (-32042): that error asks the client to retry once the page
//! is done, and a retry is a new call the host may never make; holding the call (its deadline
//! paused while a person decides) needs nothing of the host but the URL.
//!
//! rmcp 3.11 has types for URL elicitation (`ElicitRequestParams::UrlElicitationParams`, the
//! `elicitation.url` capability) but none for `notifications/elicitation/complete`: that one
//! notification is written by hand as a `CustomNotification` ([`complete_notification`]).

use std::sync::Arc;

use rmcp::model::{
    CustomNotification, ElicitRequest, ElicitRequestParams, ElicitationAction, InputRequest,
    InputRequests, InputRequiredResult, ServerNotification,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer};
use toolgate_core::approval::{InboxApprover, NamedAnswer};
use toolgate_core::tool::BoxFuture;
use toolgate_core::{
    ApprovalAnswer, ApprovalChannel, ApprovalRequest, ApprovalTicket, Approver, ApproverError,
    Principal,
};

use crate::approval::{self, APPROVAL_INPUT, HostPath};
use crate::auth::OAuthClient;

/// The method of the notification that ends a URL elicitation (2025-11-25).
pub const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// How one call reaches a person.
pub(crate) struct Route {
    pub channel: ApprovalChannel,
    /// Whether the host's own answer in the retry (`requestState` + `inputResponses`) is
    /// handed to the dispatcher: never when the state names an inbox ticket.
    pub host_answers: bool,
    /// Answer a ticket with a URL question to the inbox ticket's page (2026-07-28, no form).
    pub url_question: bool,
}

impl Route {
    fn ask(approver: impl Approver + 'static) -> Route {
        Route {
            channel: ApprovalChannel::Ask(Arc::new(approver)),
            host_answers: true,
            url_question: false,
        }
    }

    fn nobody() -> Route {
        Route {
            channel: ApprovalChannel::None,
            host_answers: true,
            url_question: false,
        }
    }

    /// Nothing the host says is taken as an answer.
    fn deaf(self) -> Route {
        Route {
            host_answers: false,
            ..self
        }
    }
}

/// The requesting client as the ticket notes it: its OAuth client id, else the name it gave in
/// `clientInfo`.
pub(crate) fn requesting_client(ctx: &RequestContext<RoleServer>) -> Option<String> {
    let oauth = ctx
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<OAuthClient>())
        .map(|OAuthClient(id)| format!("OAuth client {id}"));
    oauth.or_else(|| ctx.client_info().map(|info| info.name))
}

/// The route of a call from `ctx` by `principal` with `request_state`, and the host's
/// `action` on the question a retry answers.
pub(crate) async fn route(
    inbox: Option<&Arc<InboxApprover>>,
    ctx: &RequestContext<RoleServer>,
    (request_state, action): (Option<&str>, Option<ElicitationAction>),
    principal: &Principal,
) -> Route {
    let client = requesting_client(ctx);
    if let (Some(inbox), Some(token)) = (inbox, request_state) {
        match inbox.ledger().ticket(token).await {
            Ok(Some(_)) => {
                let retried = Retried {
                    inbox: Arc::clone(inbox),
                    token: token.to_string(),
                    principal: principal.clone(),
                    withdrawn: action.filter(|a| *a != ElicitationAction::Accept),
                };
                return Route::ask(retried).deaf();
            }
            // Not an inbox ticket: the host's answer to its own question.
            Ok(None) => {}
            // Whether it is one cannot be told: nothing is taken as an answer.
            Err(_) => return Route::nobody().deaf(),
        }
    }
    let elicitation = ctx.client_capabilities().and_then(|caps| caps.elicitation);
    match (
        approval::host_path(elicitation.as_ref(), inbox.is_some()),
        approval::is_modern(ctx),
    ) {
        (HostPath::Form, _) => Route {
            channel: approval::channel_for(ctx),
            host_answers: true,
            url_question: false,
        },
        (HostPath::Url, true) => Route {
            channel: ApprovalChannel::Ticket,
            host_answers: true,
            url_question: true,
        },
        (HostPath::Url, false) => match inbox {
            Some(inbox) => Route::ask(UrlEliciting {
                inbox: Arc::clone(inbox),
                peer: ctx.peer.clone(),
                principal: principal.clone(),
                client,
            }),
            None => Route::nobody(),
        },
        (HostPath::Inbox, _) => match inbox {
            Some(inbox) => Route::ask(Waiting {
                inbox: Arc::clone(inbox),
                principal: principal.clone(),
                client,
            }),
            None => Route::nobody(),
        },
        (HostPath::Nobody, _) => Route::nobody(),
    }
}

/// The message a URL elicitation carries: what waits, never its arguments (they are on the
/// page, behind sign-in).
fn url_message(request: &ApprovalRequest) -> String {
    format!(
        "`{}` ({} risk) waits for a person's approval in the approval inbox: open the page to \
         see exactly what it will do, and approve or decline it there.",
        request.tool,
        request.risk.as_str()
    )
}

fn url_params(request: &ApprovalRequest, url: String, id: &str) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: url_message(request),
        url,
        elicitation_id: id.to_string(),
    }
}

/// The `notifications/elicitation/complete` for elicitation `id` (written by hand: rmcp has no
/// type for it).
pub fn complete_notification(id: &str) -> ServerNotification {
    ServerNotification::CustomNotification(CustomNotification::new(
        ELICITATION_COMPLETE,
        Some(serde_json::json!({ "elicitationId": id })),
    ))
}

/// The 2026-07-28 answer to a call that needs a person, from a host that shows no form: the
/// call's request is opened as an inbox ticket, and the question names its page.
pub(crate) async fn url_question(
    inbox: &InboxApprover,
    ticket: &ApprovalTicket,
    principal: &Principal,
    client: Option<&str>,
) -> Result<InputRequiredResult, ErrorData> {
    let opened = inbox
        .open(&ticket.request, principal, client)
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let link = page_of(inbox, &opened.token)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.into(),
        InputRequest::Elicitation(ElicitRequest::new(url_params(
            &ticket.request,
            link,
            &opened.token,
        ))),
    );
    Ok(InputRequiredResult::new(Some(requests), Some(opened.token)))
}

fn page_of(inbox: &InboxApprover, token: &str) -> Result<String, ApproverError> {
    inbox
        .links()
        .link(token)
        .ok_or_else(|| ApproverError::Unavailable("the console's address is not known yet".into()))
}

/// Waits in the inbox for a call whose host can ask nobody, noting its client.
struct Waiting {
    inbox: Arc<InboxApprover>,
    principal: Principal,
    client: Option<String>,
}

impl Approver for Waiting {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move { self.decide_naming(request).await.map(|n| n.answer) })
    }

    fn decide_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<NamedAnswer, ApproverError>> {
        Box::pin(async move {
            let ticket = self
                .inbox
                .open(request, &self.principal, self.client.as_deref())
                .await?;
            self.inbox
                .await_decision(&ticket.token, request, &self.principal)
                .await
        })
    }
}

/// A 2026-07-28 retry carrying an inbox ticket: waits for the person's decision on it, or,
/// when the host's person declined or cancelled, withdraws it.
struct Retried {
    inbox: Arc<InboxApprover>,
    token: String,
    principal: Principal,
    withdrawn: Option<ElicitationAction>,
}

impl Approver for Retried {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move { self.decide_naming(request).await.map(|n| n.answer) })
    }

    fn decide_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<NamedAnswer, ApproverError>> {
        Box::pin(async move {
            match &self.withdrawn {
                Some(action) => {
                    let reason = format!(
                        "the person at the host would not open the approval page ({})",
                        approval::action_name(action)
                    );
                    self.inbox
                        .withdraw(&self.token, request, &self.principal, reason)
                        .await
                }
                None => {
                    self.inbox
                        .await_decision(&self.token, request, &self.principal)
                        .await
                }
            }
        })
    }
}

/// 2025-11-25 URL mode: sends the person to the ticket's page and waits for the decision.
struct UrlEliciting {
    inbox: Arc<InboxApprover>,
    peer: Peer<RoleServer>,
    principal: Principal,
    client: Option<String>,
}

impl Approver for UrlEliciting {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async move { self.decide_naming(request).await.map(|n| n.answer) })
    }

    fn decide_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<NamedAnswer, ApproverError>> {
        Box::pin(async move {
            let ticket = self
                .inbox
                .open(request, &self.principal, self.client.as_deref())
                .await?;
            let id = ticket.token.clone();
            let params = url_params(request, page_of(&self.inbox, &id)?, &id);
            let asked = self.peer.create_elicitation(params);
            let decided = self
                .inbox
                .await_decision(&ticket.token, request, &self.principal);
            tokio::pin!(asked, decided);
            let mut host_answered = false;
            let named = loop {
                tokio::select! {
                    named = &mut decided => break named?,
                    answer = &mut asked, if !host_answered => {
                        host_answered = true;
                        match answer {
                            // The person opened the page (or the host could not say): the
                            // decision is still the approver's.
                            Ok(result) if result.action == ElicitationAction::Accept => {}
                            Err(_) => {}
                            // Dropping the wait spends the ticket: nobody decides it now.
                            Ok(result) => {
                                return Ok(NamedAnswer {
                                    answer: ApprovalAnswer::Deny {
                                        reason: format!(
                                            "the person at the host would not open the approval page ({})",
                                            approval::action_name(&result.action)
                                        ),
                                    },
                                    decided_by: None,
                                });
                            }
                        }
                    }
                }
            };
            // Best effort: the call's answer follows whether or not the host hears this.
            let _ = self
                .peer
                .send_notification(complete_notification(&id))
                .await;
            Ok(named)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_completion_notification_names_its_elicitation() {
        let sent = serde_json::to_value(rmcp::model::JsonRpcNotification {
            jsonrpc: rmcp::model::JsonRpcVersion2_0,
            notification: complete_notification("abc"),
        })
        .unwrap();
        assert_eq!(sent["method"], ELICITATION_COMPLETE, "{sent}");
        assert_eq!(sent["params"]["elicitationId"], "abc", "{sent}");
    }

    #[test]
    fn a_url_question_names_the_page_and_no_argument() {
        let request = ApprovalRequest {
            binding: "b".into(),
            tool: "email_send".into(),
            version: 1,
            risk: toolgate_core::Risk::High,
            reason: "It sends mail.".into(),
            effect: toolgate_core::Effect::Irreversible,
            arguments: serde_json::json!({"draft_id": 7, "secret": "s3cr3t-value"}),
            preview: Some(serde_json::json!({"to": ["x@evil.example"]})),
            principal: "alice".into(),
            taint: Vec::new(),
        };
        let params = url_params(&request, "http://127.0.0.1:1/console/tickets/t".into(), "t");
        let sent = serde_json::to_value(&params).unwrap();
        assert_eq!(sent["mode"], "url", "{sent}");
        assert_eq!(
            sent["url"], "http://127.0.0.1:1/console/tickets/t",
            "{sent}"
        );
        assert_eq!(sent["elicitationId"], "t", "{sent}");
        let text = sent.to_string();
        assert!(
            !text.contains("s3cr3t-value") && !text.contains("evil.example"),
            "{text}"
        );
    }
}
