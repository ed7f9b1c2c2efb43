//! The preload of a deferring run (part of stage 1, preparing the conversation): before the
//! first request, the tools a `tool_search` for the user's last message ranks first are
//! appended after the standing set.

use std::sync::Arc;

use serde_json::json;
use toolgate_core::tool_search::{TOOL_SEARCH, names_in_result};
use toolgate_core::{CallRequest, Origin};
use toolgate_llm::Message;

use super::read_first::last_user_text;
use super::{Agent, ToolsAppended};
use crate::deferral::ToolList;

impl Agent {
    /// Before the first request of a deferring run: the tools the `tool_search` index ranks
    /// first for the user's last message, appended after the standing set (the search goes
    /// through the dispatcher as the run's principal, so it lists only what the caller may
    /// call). Returns the names appended; none when the run does not defer, preloads nothing,
    /// or the search fails (the run then starts with the standing set, as without preload).
    pub(super) async fn preload(
        &self,
        run_id: &str,
        history: &[Message],
        tools: &mut ToolList,
    ) -> Vec<String> {
        let count = self.config.deferral.as_ref().map_or(0, |d| d.preload);
        if !tools.is_deferred() || count == 0 {
            return Vec::new();
        }
        let Some(query) =
            last_user_text(history).and_then(|message| crate::deferral::preload_query(&message))
        else {
            return Vec::new();
        };
        let limit = u8::try_from(count).unwrap_or(u8::MAX);
        let request = CallRequest::new(
            self.principal.clone(),
            run_id,
            TOOL_SEARCH,
            json!({"query": query, "limit": limit}),
        )
        .with_call_id("preload")
        .with_origin(Origin::Loop);
        let outcome = self.caller.call(request).await;
        let Some(observation) = outcome.observation() else {
            return Vec::new();
        };
        let appended = tools.append_found(&names_in_result(&observation.content));
        if !appended.is_empty() {
            self.trace.record(Arc::new(ToolsAppended {
                run_id: run_id.into(),
                round: 0,
                tools: appended.clone(),
            }));
        }
        appended
    }
}
