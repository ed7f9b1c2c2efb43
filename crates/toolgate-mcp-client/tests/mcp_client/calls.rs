//! Calls to imported tools through our dispatcher, as the client's tests make them: the
//! imports assembled for a seat, one call in run `run-1`, and the untrusted text it returned.

use serde_json::Value;
use toolgate_core::{CallOutcome, CallRequest};
use toolgate_mcp_client::imports::Imports;
use toolgate_wiring::{Assembled, Seat, assemble};

/// The imported tools (and the withheld names) behind a dispatcher for `seat`.
pub fn dispatcher(imports: &Imports, seat: Seat) -> Assembled {
    assemble(imports.tools.clone(), imports.withheld.clone(), seat).expect("the imports assemble")
}

/// Calls `tool` with `args` as the seat's principal, in run `run-1`.
pub async fn call(ready: &Assembled, tool: &str, args: Value) -> CallOutcome {
    ready
        .caller
        .call(CallRequest::new(
            ready.principal.clone(),
            "run-1",
            tool,
            args,
        ))
        .await
}

/// The untrusted texts of a call that succeeded, one per line.
pub fn untrusted_text(outcome: &CallOutcome) -> String {
    let observation = outcome
        .observation()
        .unwrap_or_else(|| panic!("the call failed: {:?}", outcome.result));
    observation
        .untrusted
        .iter()
        .map(|u| u.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
