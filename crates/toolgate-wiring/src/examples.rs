//! Contract tests from a toolset's own examples (`toolgate tools --check`): every example a
//! tool declares is called through the toolset's dispatcher on a throwaway store, and its
//! result is compared with what the example says it returns.
//!
//! Guarantees: [`check_toolset`] opens a fresh store in the folder it is given, seeded as the
//! eval runner's is ([`Store::open_or_init`]), and restores it before every example, so no
//! example sees another's writes; its dispatcher comes from [`dispatcher_recording`], so the
//! exits reach nothing (a fetch or a mail is checked and traced, never sent), and its approval
//! channel approves every call (the examples are the catalogue's own, run on a copy nobody
//! keeps). An example passes when its call succeeds and, where it declares an expected result
//! ([`Expected`]), the result matches it; an error result fails the example unless it says it
//! expects exactly that error code. Refuses nothing itself: the store's and the declarations'
//! errors come back as [`WiringError`].

use std::path::Path;
use std::sync::Arc;

use toolgate_core::approval::{ApprovalAnswer, ApprovalRequest, ApproverError};
use toolgate_core::spec::{ActualResult, Example, check_example_result};
use toolgate_core::{Approver, BoxFuture, CallRequest, Principal};

use crate::dispatch::{Assembled, Seat, dispatcher_recording};
use crate::error::WiringError;
use crate::exits::ExitsConfig;
use crate::store::Store;
use crate::toolset::ToolsetName;

/// How one example fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Every reason it failed.
    Failed(Vec<String>),
}

/// One example's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleReport {
    pub tool: String,
    pub label: String,
    pub verdict: Verdict,
}

impl ExampleReport {
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Passed
    }
}

/// Approves every call: the examples are the catalogue's own, run on a throwaway store.
struct ApproveExamples;

impl Approver for ApproveExamples {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        Box::pin(async { Ok(ApprovalAnswer::Approve) })
    }
}

/// The dispatcher the examples of `toolset` run through, on a fresh seeded store in `folder`.
pub fn example_dispatcher(
    toolset: ToolsetName,
    folder: &Path,
) -> Result<(Store, Assembled), WiringError> {
    let store = Store::open_or_init(toolset.store(), &folder.join(format!("{toolset}.sqlite")))?;
    let seat = Seat::new(Principal::local("toolgate-examples", &[]))
        .with_approver(Arc::new(ApproveExamples));
    let (ready, _recorder) = dispatcher_recording(toolset, &store, &ExitsConfig::default(), seat)?;
    Ok((store, ready))
}

/// Every example of every tool of `ready`, with the tool's name, in catalogue order.
pub fn declared_examples(ready: &Assembled) -> Vec<(String, Example)> {
    ready
        .registry
        .specs()
        .flat_map(|spec| {
            spec.examples
                .iter()
                .map(move |example| (spec.name.clone(), example.clone()))
        })
        .collect()
}

/// Runs every example of `toolset` on a fresh store in `folder` and reports each.
pub async fn check_toolset(
    toolset: ToolsetName,
    folder: &Path,
) -> Result<Vec<ExampleReport>, WiringError> {
    let (store, ready) = example_dispatcher(toolset, folder)?;
    let examples = declared_examples(&ready);
    run_examples(&store, &ready, examples).await
}

/// Runs `examples` through `ready`, restoring `store` before each.
pub async fn run_examples(
    store: &Store,
    ready: &Assembled,
    examples: Vec<(String, Example)>,
) -> Result<Vec<ExampleReport>, WiringError> {
    let mut reports = Vec::new();
    for (i, (tool, example)) in examples.into_iter().enumerate() {
        store.reset()?;
        let request = CallRequest::new(
            ready.principal.clone(),
            "tools-check",
            &tool,
            example.arguments.clone(),
        )
        .with_call_id(&format!("example-{i}"));
        let outcome = ready.caller.call(request).await;
        let actual = match (outcome.observation(), outcome.error()) {
            (Some(observation), _) => Ok(ActualResult::Content(&observation.content)),
            (None, Some(error)) => Ok(ActualResult::Error(error.code.as_str())),
            (None, None) => Err(vec![format!(
                "the call waited for a human's approval: {}",
                outcome.model_text()
            )]),
        };
        let verdict = match actual {
            Err(problems) => Verdict::Failed(problems),
            Ok(actual) => match (&example.expected, &actual) {
                (Some(expected), _) => match check_example_result(expected, &actual) {
                    Ok(()) => Verdict::Passed,
                    Err(problems) => Verdict::Failed(problems),
                },
                (None, ActualResult::Content(_)) => Verdict::Passed,
                (None, ActualResult::Error(code)) => Verdict::Failed(vec![format!(
                    "the call failed with `{code}`: {}",
                    outcome.model_text()
                )]),
            },
        };
        reports.push(ExampleReport {
            tool,
            label: example.label,
            verdict,
        });
    }
    Ok(reports)
}

#[cfg(test)]
#[path = "examples_tests.rs"]
mod tests;
