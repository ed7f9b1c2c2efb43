//! Phases in the policy view: a run explores with the tools that only read, and a tool that
//! changes something joins its catalogue only after a person approves a plan naming the exact
//! call.
//!
//! With `[phases] gate_writes = true`, a *gated* tool (it writes, or its effect is not `read`,
//! and it is not listed in `ungated`) is closed in every run until a plan for it is approved:
//! - the model proposes the call with [`PLAN_TOOL`] (`{tool, arguments}`); the dispatcher
//!   validates the proposed arguments against the tool's own schema and check, shows the person
//!   the tool's own preview, and asks (the plan tool is high risk: always asked, in every mode);
//! - a yes records a [`Grant`] bound to the principal (within its tenant), the run, the tool,
//!   its version, the digest of the canonical arguments and an expiry;
//! - the tool then joins that run's catalogue ([`PhaseGate::open_tools`]), and the dispatcher
//!   admits exactly that call once: the grant counts as the call's approval
//!   ([`ApprovedVia::Plan`](crate::call::ApprovedVia::Plan)), so the person is not asked twice.
//!
//! Guarantees:
//! - the listing and the dispatcher ask the same question ([`admission`], a pure function of
//!   the run's grants, the call and the time), so a closed tool is refused at the catalogue
//!   stage even when named from an old transcript, another run or another principal;
//! - a grant is used once: taking it happens under one lock, so two concurrent calls with the
//!   same arguments cannot both use it; a retry of the same write whose receipt is recorded
//!   replays it (nothing happens again) and needs no second plan;
//! - different arguments, another version of the tool, an expired or a used grant, another
//!   run or another principal: refused, with what to do next;
//! - grants live in memory for the last [`MAX_RUNS_KEPT`] runs; a forgotten run's grants are
//!   gone, which closes its tools again (fails closed).
//!
//! What it does not do: share grants between a team's instances (each process keeps its own),
//! or decide what a plan should contain (one plan, one call).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::principal::Principal;
use crate::spec::{Effect, ToolSpec};

/// The tool a model proposes a change with.
pub const PLAN_TOOL: &str = "plan_propose";
/// How long an approved plan stays usable unless configured.
pub const DEFAULT_PLAN_TTL_SECS: u64 = 600;
/// Runs whose grants are remembered at once.
pub const MAX_RUNS_KEPT: usize = 10_000;

/// The `[phases]` configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseConfig {
    /// Close the tools that change something until a plan naming the call is approved.
    #[serde(default)]
    pub gate_writes: bool,
    /// How long an approved plan stays usable, in seconds.
    pub plan_ttl_secs: Option<u64>,
    /// Tools that change something but stay open in every phase (say a draft that only the
    /// user sees); every name must be a tool that exists.
    #[serde(default)]
    pub ungated: Vec<String>,
}

impl PhaseConfig {
    pub fn plan_ttl_secs(&self) -> u64 {
        self.plan_ttl_secs.unwrap_or(DEFAULT_PLAN_TTL_SECS)
    }
}

/// Whether `spec` is closed until a plan for it is approved under `config`.
pub fn gated(config: &PhaseConfig, spec: &ToolSpec) -> bool {
    config.gate_writes
        && spec.name != PLAN_TOOL
        && !config.ungated.iter().any(|name| name == &spec.name)
        && (spec.executor.writes || spec.policy.effect != Effect::Read)
}

/// One approved plan: one call, once, before it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    pub tool: String,
    pub version: u32,
    /// Digest of the canonical arguments (the decision record's `args_hash`).
    pub args_hash: String,
    pub granted_at_unix: u64,
    pub expires_at_unix: u64,
    pub used: bool,
}

/// What the grants of a run say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// An unused, unexpired grant for exactly this call (its index among the run's grants).
    Open(usize),
    /// The grant for exactly this call was used: only a replay of the same write may pass.
    Used,
    /// The plan for exactly this call expired at this time.
    Expired { at_unix: u64 },
    /// A plan for this tool is open, for other arguments or another version of the tool.
    OtherCall,
    /// No plan names this tool in this run.
    NoPlan,
}

/// Whether the grants `grants` admit a call of `tool` at `version` with arguments digested to
/// `args_hash` at `now_unix`. A grant is live until `expires_at_unix` (exclusive).
pub fn admission(
    grants: &[Grant],
    tool: &str,
    version: u32,
    args_hash: &str,
    now_unix: u64,
) -> Admission {
    let exact = |g: &Grant| g.tool == tool && g.version == version && g.args_hash == args_hash;
    if let Some(index) = grants
        .iter()
        .position(|g| exact(g) && !g.used && now_unix < g.expires_at_unix)
    {
        return Admission::Open(index);
    }
    if grants.iter().any(|g| exact(g) && g.used) {
        return Admission::Used;
    }
    if let Some(at_unix) = grants
        .iter()
        .filter(|g| exact(g))
        .map(|g| g.expires_at_unix)
        .max()
    {
        return Admission::Expired { at_unix };
    }
    if grants
        .iter()
        .any(|g| g.tool == tool && !g.used && now_unix < g.expires_at_unix)
    {
        return Admission::OtherCall;
    }
    Admission::NoPlan
}

/// The tools with a live, unused grant: open in the run now.
pub fn open_tools(grants: &[Grant], now_unix: u64) -> BTreeSet<String> {
    grants
        .iter()
        .filter(|g| !g.used && now_unix < g.expires_at_unix)
        .map(|g| g.tool.clone())
        .collect()
}

/// One call as a plan binds it: who, in which run, which tool at which version, the digest of
/// its canonical arguments, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCall<'a> {
    pub principal: &'a Principal,
    pub run: &'a str,
    pub tool: &'a str,
    pub version: u32,
    pub args_hash: String,
    pub now_unix: u64,
}

/// (tenant, principal id, run id).
type RunKey = (String, String, String);

fn run_key(principal: &Principal, run: &str) -> RunKey {
    (
        principal.tenant.clone(),
        principal.id.clone(),
        run.to_string(),
    )
}

/// The grants of one process (see the module doc).
#[derive(Debug)]
pub struct PhaseGate {
    config: PhaseConfig,
    runs: Mutex<Runs>,
}

#[derive(Debug, Default)]
struct Runs {
    grants: HashMap<RunKey, Vec<Grant>>,
    /// Runs in the order first granted, for forgetting the oldest.
    order: VecDeque<RunKey>,
}

impl PhaseGate {
    pub fn new(config: PhaseConfig) -> Self {
        PhaseGate {
            config,
            runs: Mutex::new(Runs::default()),
        }
    }

    pub fn config(&self) -> &PhaseConfig {
        &self.config
    }

    /// Whether `spec` is closed until a plan for it is approved.
    pub fn gates(&self, spec: &ToolSpec) -> bool {
        gated(&self.config, spec)
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, Runs> {
        // Grants are plain data: a panic elsewhere left them usable.
        match self.runs.lock() {
            Ok(runs) => runs,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Records an approved plan for `principal`'s run `run`, usable for the configured time.
    pub fn grant(
        &self,
        principal: &Principal,
        run: &str,
        tool: &str,
        version: u32,
        args_hash: &str,
        now_unix: u64,
    ) -> Grant {
        let grant = Grant {
            tool: tool.to_string(),
            version,
            args_hash: args_hash.to_string(),
            granted_at_unix: now_unix,
            expires_at_unix: now_unix.saturating_add(self.config.plan_ttl_secs()),
            used: false,
        };
        let key = run_key(principal, run);
        let mut runs = self.runs();
        if !runs.grants.contains_key(&key) {
            if runs.order.len() >= MAX_RUNS_KEPT
                && let Some(oldest) = runs.order.pop_front()
            {
                runs.grants.remove(&oldest);
            }
            runs.order.push_back(key.clone());
        }
        runs.grants.entry(key).or_default().push(grant.clone());
        grant
    }

    /// The grants of `call`'s principal and run.
    fn grants_of<'r>(runs: &'r Runs, call: &PlannedCall<'_>) -> &'r [Grant] {
        runs.grants
            .get(&run_key(call.principal, call.run))
            .map_or(&[][..], Vec::as_slice)
    }

    /// What `call`'s run admits for it now; nothing is used.
    pub fn admission(&self, call: &PlannedCall<'_>) -> Admission {
        let runs = self.runs();
        let grants = Self::grants_of(&runs, call);
        admission(
            grants,
            call.tool,
            call.version,
            &call.args_hash,
            call.now_unix,
        )
    }

    /// Uses the grant for exactly `call`, or says why there is none to use.
    pub fn take(&self, call: &PlannedCall<'_>) -> Result<Grant, Admission> {
        let mut runs = self.runs();
        let Some(grants) = runs.grants.get_mut(&run_key(call.principal, call.run)) else {
            return Err(Admission::NoPlan);
        };
        match admission(
            grants,
            call.tool,
            call.version,
            &call.args_hash,
            call.now_unix,
        ) {
            Admission::Open(index) => match grants.get_mut(index) {
                Some(grant) => {
                    grant.used = true;
                    Ok(grant.clone())
                }
                None => Err(Admission::NoPlan),
            },
            refused @ (Admission::Used
            | Admission::Expired { .. }
            | Admission::OtherCall
            | Admission::NoPlan) => Err(refused),
        }
    }

    /// The gated tools open in `principal`'s run `run` now.
    pub fn open_tools(&self, principal: &Principal, run: &str, now_unix: u64) -> BTreeSet<String> {
        let runs = self.runs();
        runs.grants
            .get(&run_key(principal, run))
            .map_or_else(BTreeSet::new, |grants| open_tools(grants, now_unix))
    }
}

#[cfg(test)]
#[path = "phase_gate_tests.rs"]
mod tests;
