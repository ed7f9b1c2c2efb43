//! A toolset's tools on its store with its exits, and the dispatcher for a principal: what
//! every front end (`ask`, `chat`, `demo`, `tools`, the eval runner, the MCP server) used to
//! wire by hand.
//!
//! Guarantees: [`tools`] binds a toolset only to a store of its own kind, and builds exits
//! only for a toolset that uses them (the books toolsets never get any); [`dispatcher`]
//! returns a [`Caller`] over a [`Dispatcher`] of exactly the toolset's tools, with the seat's
//! approval channel, mode and trace, and a principal whose catalogue is exactly those tools'
//! names, with what the toolset offers besides tools ([`Offers`]: the notes toolsets' resources
//! and prompts; nothing from [`assemble`], which knows no toolset). A seat with no channel asks
//! nobody, so every call that needs a human is denied. Refuses: a toolset
//! on another kind of store ([`WiringError::WrongStore`]), exits the allowlist does not admit,
//! and tool declarations or registries the contract rejects.

use std::collections::BTreeMap;
use std::sync::Arc;

use toolgate_core::trace::{NoTrace, TraceSink};
use toolgate_core::{
    ApprovalChannel, ApprovalLedger, Approver, Caller, Dispatcher, Mode, Principal, Registry, Tool,
};

use toolgate_core::budget::Budgets;
use toolgate_core::offers::Offers;
use toolgate_core::phase_gate::{PLAN_TOOL, PhaseGate};
use toolgate_core::plan_tool::plan_propose_tool;
use toolgate_core::receipt_signing::ReceiptSigner;
use toolgate_core::taint::TaintPolicy;
use toolgate_core::telemetry::Telemetry;

use crate::code::{CodeOptions, code_tool};
use crate::error::WiringError;
use crate::exits::{ExitsConfig, RecordingResolver};
use crate::store::Store;
use crate::toolset::ToolsetName;
use toolgate_egress::{Resolver, SystemResolver};

/// Who a dispatcher serves and how it asks: everything about it that is not the toolset.
pub struct Seat {
    /// The caller; its catalogue is replaced by the toolset's tool names.
    pub principal: Principal,
    /// How a human is reached for calls that need one.
    pub approval: ApprovalChannel,
    pub mode: Mode,
    /// What is done with calls whose values came from untrusted text.
    pub taint: TaintPolicy,
    /// Where the dispatcher's decisions and the exits' traffic are recorded.
    pub trace: Arc<dyn TraceSink>,
    /// Where approval tickets are kept: `None` for this process's own memory; a shared store's
    /// ([`crate::SharedStore::ledger`]) so that any instance redeems a ticket another issued.
    pub ledger: Option<Arc<ApprovalLedger>>,
    /// Signs each write's receipt (`[receipts] signing_key`); `None`: receipts go out unsigned.
    pub receipt_signer: Option<ReceiptSigner>,
    /// What each run and principal may spend (`[budgets]`); `None`: unlimited.
    pub budgets: Option<Arc<Budgets>>,
    /// Which tools wait for an approved plan, and the plans approved (`[phases]`); `None`: no
    /// phases.
    pub phases: Option<Arc<PhaseGate>>,
    /// Spans and metrics for every call (`[telemetry]`); off by default.
    pub telemetry: Telemetry,
}

impl Seat {
    /// `principal` with no approval channel (every call that needs a human is denied), the
    /// default mode and no trace.
    pub fn new(principal: Principal) -> Self {
        Seat {
            principal,
            approval: ApprovalChannel::None,
            mode: Mode::default(),
            taint: TaintPolicy::default(),
            trace: Arc::new(NoTrace),
            ledger: None,
            receipt_signer: None,
            budgets: None,
            phases: None,
            telemetry: Telemetry::off(),
        }
    }

    /// Keeps approval tickets in `ledger` (a shared store's, for many instances).
    pub fn with_ledger(mut self, ledger: Arc<ApprovalLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Asks `approver` (and waits) for every call that needs a human.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approval = ApprovalChannel::Ask(approver);
        self
    }

    pub fn with_approval(mut self, channel: ApprovalChannel) -> Self {
        self.approval = channel;
        self
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_trace(mut self, trace: Arc<dyn TraceSink>) -> Self {
        self.trace = trace;
        self
    }

    pub fn with_taint_policy(mut self, policy: TaintPolicy) -> Self {
        self.taint = policy;
        self
    }

    /// Charges every call to `budgets` (shared by the dispatchers of one front end, so a
    /// rebuilt dispatcher keeps counting).
    pub fn with_budgets(mut self, budgets: Arc<Budgets>) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// Keeps the tools `gate` closes out of each run's catalogue until the person approves a
    /// plan naming the call; the assembled tools get `plan_propose` (shared by the dispatchers
    /// of one front end, so a rebuilt dispatcher keeps the plans approved).
    pub fn with_phases(mut self, gate: Arc<PhaseGate>) -> Self {
        self.phases = Some(gate);
        self
    }

    /// Records a span per call and the call metrics through `telemetry` (`[telemetry]`).
    pub fn with_telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Signs each write's receipt with `signer`, when one is given.
    pub fn with_receipt_signer(mut self, signer: Option<ReceiptSigner>) -> Self {
        self.receipt_signer = signer;
        self
    }
}

/// The tools of `toolset` bound to `store`; a toolset that reaches out gets the exits of
/// `exits`, tracing to `trace`.
pub fn tools(
    toolset: ToolsetName,
    store: &Store,
    exits: &ExitsConfig,
    trace: Arc<dyn TraceSink>,
) -> Result<Vec<Tool>, WiringError> {
    tools_resolving(toolset, store, exits, Arc::new(SystemResolver), trace)
}

/// As [`tools`], the exits resolving names with `resolver` (a [`RecordingResolver`] makes
/// them recorders that reach nothing).
pub fn tools_resolving(
    toolset: ToolsetName,
    store: &Store,
    exits: &ExitsConfig,
    resolver: Arc<dyn Resolver>,
    trace: Arc<dyn TraceSink>,
) -> Result<Vec<Tool>, WiringError> {
    let wrong = || WiringError::WrongStore {
        toolset,
        store: store.kind(),
    };
    match (toolset.books_design(), toolset.notes_design(), store) {
        (Some(design), _, Store::Books(books)) => Ok(design.tools(books)?),
        (None, Some(design), Store::Notes(notes)) => {
            let built = exits.build_with(resolver, trace)?;
            Ok(toolgate_notes::designed_assistant_tools(
                notes,
                built.egress,
                built.relay,
                design,
            )?)
        }
        (_, _, Store::Notes(_)) | (None, _, Store::Books(_)) => Err(wrong()),
    }
}

/// Tools from outside any toolset (imported from other MCP servers), and the names withheld
/// from the registry with the reason (imported tools in quarantine).
#[derive(Default)]
pub struct ExtraTools {
    pub tools: Vec<Tool>,
    pub withheld: BTreeMap<String, String>,
    /// Also offer `tool_search` over every tool (so a loop may defer their definitions).
    pub with_search: bool,
    /// Also offer `code_execution`, whose scripts may call every other tool.
    pub code: Option<CodeOptions>,
}

/// A dispatcher over some tools for one principal, whatever toolset (if any) they came from,
/// ready for calls.
pub struct Assembled {
    pub registry: Arc<Registry>,
    /// The dispatcher with the seat's approval channel and mode: every call goes through it.
    pub caller: Caller,
    /// The seat's principal, its catalogue set to exactly the tools.
    pub principal: Principal,
    /// What the toolset offers besides its tools (resources, prompts): empty unless built for
    /// a toolset ([`dispatcher`]) that offers some.
    pub offers: Offers,
}

/// The dispatcher over `tools` (with `withheld` names refused with their reason), for the
/// seat's principal.
pub fn assemble(
    tools: Vec<Tool>,
    withheld: BTreeMap<String, String>,
    seat: Seat,
) -> Result<Assembled, WiringError> {
    assemble_with(tools, withheld, false, seat)
}

/// As [`assemble`], with `tool_search` over every tool when `with_search`.
pub fn assemble_with(
    tools: Vec<Tool>,
    withheld: BTreeMap<String, String>,
    with_search: bool,
    seat: Seat,
) -> Result<Assembled, WiringError> {
    let phases = seat.phases.filter(|gate| gate.config().gate_writes);
    let mut tools = tools;
    add_plan_tool(phases.as_ref(), &mut tools)?;
    let registry = if with_search {
        toolgate_core::tool_search::registry_with_search(tools)?
    } else {
        Registry::new(tools)?
    };
    let registry = Arc::new(registry.withholding(withheld));
    let principal = seat.principal.with_catalogue(registry.names());
    let mut dispatcher = Dispatcher::new(Arc::clone(&registry))?
        .with_mode(seat.mode)
        .with_taint_policy(seat.taint)
        .with_trace(seat.trace)
        .with_telemetry(seat.telemetry);
    if let Some(ledger) = seat.ledger {
        dispatcher = dispatcher.with_ledger(ledger);
    }
    if let Some(signer) = seat.receipt_signer {
        dispatcher = dispatcher.with_receipt_signer(signer);
    }
    if let Some(budgets) = seat.budgets {
        dispatcher = dispatcher.with_budgets(budgets);
    }
    if let Some(gate) = phases {
        dispatcher = dispatcher.with_phases(gate);
    }
    Ok(Assembled {
        registry,
        caller: Caller::new(dispatcher).with_approval(seat.approval),
        principal,
        offers: Offers::default(),
    })
}

/// With `phases`, `plan_propose` over the tools it closes, once (a caller may have added it
/// already, so that code mode's scripts can propose plans too); nothing to propose (a toolset
/// that only reads): no plan tool.
fn add_plan_tool(
    phases: Option<&Arc<PhaseGate>>,
    tools: &mut Vec<Tool>,
) -> Result<(), WiringError> {
    let Some(gate) = phases.filter(|gate| gate.config().gate_writes) else {
        return Ok(());
    };
    if tools.iter().any(|t| t.spec.name == PLAN_TOOL) {
        return Ok(());
    }
    check_ungated(gate, tools)?;
    if tools.iter().any(|t| gate.gates(&t.spec)) {
        let plan = plan_propose_tool(Arc::clone(gate), tools.iter().map(|t| &t.spec))?;
        tools.push(plan);
    }
    Ok(())
}

/// A name in `[phases] ungated` must be a tool that is served: a misspelt name would leave the
/// tool it meant closed, or (worse) be read as opening one that does not exist yet.
fn check_ungated(gate: &PhaseGate, tools: &[Tool]) -> Result<(), WiringError> {
    let unknown: Vec<String> = gate
        .config()
        .ungated
        .iter()
        .filter(|name| !tools.iter().any(|t| &t.spec.name == *name))
        .cloned()
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        let known: Vec<&str> = tools.iter().map(|t| t.spec.name.as_str()).collect();
        Err(WiringError::UnknownUngated {
            unknown: unknown.join(", "),
            known: known.join(", "),
        })
    }
}

/// The dispatcher over `toolset` on `store` with `exits`, for the seat's principal.
pub fn dispatcher(
    toolset: ToolsetName,
    store: &Store,
    exits: &ExitsConfig,
    seat: Seat,
) -> Result<Assembled, WiringError> {
    dispatcher_with(toolset, store, exits, seat, ExtraTools::default())
}

/// As [`dispatcher`], with `extra` tools beside the toolset's (their names must not clash),
/// and with what the toolset offers besides tools.
pub fn dispatcher_with(
    toolset: ToolsetName,
    store: &Store,
    exits: &ExitsConfig,
    seat: Seat,
    extra: ExtraTools,
) -> Result<Assembled, WiringError> {
    let mut all = tools(toolset, store, exits, Arc::clone(&seat.trace))?;
    all.extend(extra.tools);
    if let Some(code) = &extra.code {
        // Before the code tool is built over the others, so that a script can propose too.
        add_plan_tool(seat.phases.as_ref(), &mut all)?;
        let tool = code_tool(code, store, &all)?;
        all.push(tool);
    }
    let assembled = assemble_with(all, extra.withheld, extra.with_search, seat)?;
    Ok(Assembled {
        offers: offers(store),
        ..assembled
    })
}

/// The dispatcher over `toolset` on `store` for the seat's principal, with the exits of
/// `exits` made recorders (shadow replay): every request is checked and traced as usual, and
/// none leaves the process; the resolver returned says which names would have been reached.
pub fn dispatcher_recording(
    toolset: ToolsetName,
    store: &Store,
    exits: &ExitsConfig,
    seat: Seat,
) -> Result<(Assembled, Arc<RecordingResolver>), WiringError> {
    let recorder = Arc::new(RecordingResolver::new());
    let tools = tools_resolving(
        toolset,
        store,
        exits,
        Arc::clone(&recorder) as Arc<dyn Resolver>,
        Arc::clone(&seat.trace),
    )?;
    let assembled = assemble_with(tools, BTreeMap::new(), false, seat)?;
    Ok((
        Assembled {
            offers: offers(store),
            ..assembled
        },
        recorder,
    ))
}

/// What the toolsets on `store` offer besides tools: the notes toolsets their notes as
/// resources and their prompts, the books toolsets nothing.
fn offers(store: &Store) -> Offers {
    match store {
        Store::Notes(notes) => toolgate_notes::offers::offers(notes),
        Store::Books(_) => Offers::default(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::CallRequest;

    use super::*;
    use crate::toolset::StoreKind;

    #[tokio::test]
    async fn each_toolset_gets_a_dispatcher_over_exactly_its_tools() {
        let dir = tempfile::tempdir().unwrap();
        for toolset in ToolsetName::ALL {
            let kind = toolset.store();
            let path = dir.path().join(format!("{toolset}.sqlite"));
            let store = Store::open_or_init(kind, &path).unwrap();
            let ready = dispatcher(
                toolset,
                &store,
                &ExitsConfig::default(),
                Seat::new(Principal::local("test", &[])),
            )
            .unwrap();
            let names: Vec<&str> = ready.registry.names().collect();
            assert!(!names.is_empty(), "{toolset}");
            for name in &names {
                assert!(ready.principal.in_catalogue(name), "{toolset}: {name}");
            }
            assert!(!ready.principal.in_catalogue("no_such_tool"));
            let other = match kind {
                StoreKind::Books => ToolsetName::Notes,
                StoreKind::Notes => ToolsetName::BooksV2,
            };
            assert!(matches!(
                tools(other, &store, &ExitsConfig::default(), Arc::new(NoTrace)),
                Err(WiringError::WrongStore { .. })
            ));
        }
    }

    #[tokio::test]
    async fn only_the_notes_toolsets_offer_resources_and_prompts_read_by_their_own_tool() {
        let dir = tempfile::tempdir().unwrap();
        for toolset in ToolsetName::ALL {
            let kind = toolset.store();
            let path = dir.path().join(format!("{toolset}.sqlite"));
            let store = Store::open_or_init(kind, &path).unwrap();
            let seat = || Seat::new(Principal::local("test", &[]));
            let ready = dispatcher(toolset, &store, &ExitsConfig::default(), seat()).unwrap();
            let notes = kind == StoreKind::Notes;
            assert_eq!(ready.offers.resources.is_some(), notes, "{toolset}");
            assert_eq!(!ready.offers.prompts.is_empty(), notes, "{toolset}");
            if let Some(resources) = &ready.offers.resources {
                assert!(
                    ready.registry.get(resources.read_tool()).is_some(),
                    "{toolset}"
                );
            }
            let tools = tools(toolset, &store, &ExitsConfig::default(), Arc::new(NoTrace));
            let bare = assemble(tools.unwrap(), BTreeMap::new(), seat()).unwrap();
            assert!(bare.offers.resources.is_none() && bare.offers.prompts.is_empty());
        }
    }

    #[tokio::test]
    async fn with_search_the_dispatcher_also_offers_tool_search_over_every_tool() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_init(StoreKind::Books, &dir.path().join("b.sqlite")).unwrap();
        let extra = ExtraTools {
            with_search: true,
            ..ExtraTools::default()
        };
        let seat = Seat::new(Principal::local("test", &[]));
        let ready = dispatcher_with(
            ToolsetName::BooksV2,
            &store,
            &ExitsConfig::default(),
            seat,
            extra,
        )
        .unwrap();
        assert!(ready.principal.in_catalogue("tool_search"));
        let found = ready
            .caller
            .call(CallRequest::new(
                ready.principal.clone(),
                "run-1",
                "tool_search",
                json!({"query": "find books by author"}),
            ))
            .await;
        let text = found.model_text();
        assert!(text.contains("books_search"), "{text}");
        let plain = dispatcher(
            ToolsetName::BooksV2,
            &store,
            &ExitsConfig::default(),
            Seat::new(Principal::local("test", &[])),
        )
        .unwrap();
        assert!(plain.registry.get("tool_search").is_none());
    }

    #[tokio::test]
    async fn an_assembled_dispatcher_runs_the_toolsets_calls() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_init(StoreKind::Books, &dir.path().join("b.sqlite")).unwrap();
        let ready = dispatcher(
            ToolsetName::BooksV2,
            &store,
            &ExitsConfig::default(),
            Seat::new(Principal::local("test", &[])),
        )
        .unwrap();
        let ok = ready
            .caller
            .call(CallRequest::new(
                ready.principal.clone(),
                "run-1",
                "books_get",
                json!({"ids": [1]}),
            ))
            .await;
        assert!(ok.observation().is_some(), "{:?}", ok.result);
    }
}
