//! A dispatcher as one front end uses it: the approval channel and mode that front end gives
//! every call that does not name its own (our terminal's approver for `toolgate ask`, none for
//! an eval). The dispatcher stays the only call path; this only fills in the request.

use std::sync::Arc;

use crate::approval::{ApprovalChannel, Approver, Mode};
use crate::call::{CallOutcome, CallRequest};
use crate::dispatcher::Dispatcher;

#[derive(Clone)]
pub struct Caller {
    dispatcher: Dispatcher,
    approval: ApprovalChannel,
    mode: Option<Mode>,
}

impl Caller {
    /// No approval channel (every call that needs a human is denied) and the dispatcher's mode.
    pub fn new(dispatcher: Dispatcher) -> Self {
        Caller {
            dispatcher,
            approval: ApprovalChannel::None,
            mode: None,
        }
    }

    /// Asks `approver` (and waits) for every call that needs a human.
    pub fn with_approver(self, approver: Arc<dyn Approver>) -> Self {
        self.with_approval(ApprovalChannel::Ask(approver))
    }

    pub fn with_approval(mut self, channel: ApprovalChannel) -> Self {
        self.approval = channel;
        self
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    pub fn approval(&self) -> &ApprovalChannel {
        &self.approval
    }

    /// The mode calls get: this front end's, else the dispatcher's.
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or(self.dispatcher.mode())
    }

    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Runs `request` with this front end's channel and mode where it names none.
    pub async fn call(&self, mut request: CallRequest) -> CallOutcome {
        if matches!(request.approval, ApprovalChannel::None) {
            request.approval = self.approval.clone();
        }
        if request.mode.is_none() {
            request.mode = self.mode;
        }
        self.dispatcher.call(request).await
    }
}

impl std::ops::Deref for Caller {
    type Target = Dispatcher;

    fn deref(&self) -> &Dispatcher {
        &self.dispatcher
    }
}
