//! Budgets in the policy view: how much one run and one principal may spend: calls, writes,
//! approvals asked, outbound requests, model tokens.
//!
//! Guarantees:
//! - whether a spend fits is one pure function of the limits and what was spent
//!   ([`admit`]); a spend that does not fit is refused whole (nothing of it is counted) with
//!   a typed [`Exhausted`] naming the scope, the kind, the limit and what was spent, which the
//!   dispatcher returns as `budget_exhausted` and records;
//! - a spend is checked against the run's and the principal's limits and counted in both under
//!   one lock, so concurrent calls (a script's nested calls, parallel tool calls) cannot
//!   overspend between the check and the count;
//! - a principal's budget is per window (`principal_window_secs`, a day by default) of the
//!   dispatcher's clock; a run's lasts as long as the run. Runs are kept for the last
//!   [`MAX_RUNS_KEPT`] runs seen; a run forgotten starts again from zero, and the principal's
//!   budget still bounds it;
//! - nested calls carry their run, so a script in code mode spends the run's budget like the
//!   model's direct calls; the egress exit charges each outbound request to the call it serves
//!   ([`charge_in_call`]); the loop charges the model's tokens ([`Budgets::charge`]).
//!
//! What it does not do: keep budgets across processes (each instance counts its own; a team's
//! shared counters are not built yet).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::principal::Principal;

/// Runs whose spending is remembered at once.
pub const MAX_RUNS_KEPT: usize = 10_000;
/// A principal's budget window unless configured.
pub const DEFAULT_PRINCIPAL_WINDOW_SECS: u64 = 24 * 60 * 60;

/// What may be spent; `None`: unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub calls: Option<u64>,
    pub writes: Option<u64>,
    pub approvals: Option<u64>,
    pub outbound: Option<u64>,
    pub tokens: Option<u64>,
}

/// The `[budgets]` configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    #[serde(default)]
    pub per_run: Limits,
    #[serde(default)]
    pub per_principal: Limits,
    /// How long a principal's budget lasts before it starts again, in seconds.
    pub principal_window_secs: Option<u64>,
}

/// One thing spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// A tool call admitted by policy; `writes` when the tool writes.
    Call { writes: bool },
    /// A person asked to approve.
    Approval,
    /// An outbound request through the egress exit.
    Outbound,
    /// Model tokens (input and output) of one turn.
    Tokens(u64),
}

/// What has been spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spent {
    pub calls: u64,
    pub writes: u64,
    pub approvals: u64,
    pub outbound: u64,
    pub tokens: u64,
}

/// Whose budget a spend did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Run,
    Principal,
}

/// A spend that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("the {scope_name}'s budget of {limit} {kind} is spent ({spent} used)", scope_name = match .scope { Scope::Run => "run", Scope::Principal => "principal" })]
pub struct Exhausted {
    pub scope: Scope,
    /// `calls`, `writes`, `approvals`, `outbound requests`, `model tokens`.
    pub kind: &'static str,
    pub limit: u64,
    pub spent: u64,
}

/// Each (kind, limit, spent so far, amount) a spend touches.
fn lines(
    limits: &Limits,
    spent: &Spent,
    spend: Spend,
) -> Vec<(&'static str, Option<u64>, u64, u64)> {
    match spend {
        Spend::Call { writes } => {
            let mut lines = vec![("calls", limits.calls, spent.calls, 1)];
            if writes {
                lines.push(("writes", limits.writes, spent.writes, 1));
            }
            lines
        }
        Spend::Approval => vec![("approvals", limits.approvals, spent.approvals, 1)],
        Spend::Outbound => vec![("outbound requests", limits.outbound, spent.outbound, 1)],
        Spend::Tokens(n) => vec![("model tokens", limits.tokens, spent.tokens, n)],
    }
}

/// Whether `spend` fits in `limits` after `spent`. Tokens are counted after the turn that used
/// them, so a turn may pass the limit once; the next spend of tokens is then refused.
pub fn admit(limits: &Limits, spent: &Spent, spend: Spend, scope: Scope) -> Result<(), Exhausted> {
    for (kind, limit, used, amount) in lines(limits, spent, spend) {
        let Some(limit) = limit else { continue };
        let over = match spend {
            // Known only afterwards: refused once the budget is already used up.
            Spend::Tokens(_) => used >= limit,
            Spend::Call { .. } | Spend::Approval | Spend::Outbound => {
                used.saturating_add(amount) > limit
            }
        };
        if over {
            return Err(Exhausted {
                scope,
                kind,
                limit,
                spent: used,
            });
        }
    }
    Ok(())
}

fn add(spent: &mut Spent, spend: Spend) {
    match spend {
        Spend::Call { writes } => {
            spent.calls = spent.calls.saturating_add(1);
            if writes {
                spent.writes = spent.writes.saturating_add(1);
            }
        }
        Spend::Approval => spent.approvals = spent.approvals.saturating_add(1),
        Spend::Outbound => spent.outbound = spent.outbound.saturating_add(1),
        Spend::Tokens(n) => spent.tokens = spent.tokens.saturating_add(n),
    }
}

/// The counters of one dispatcher (see the module doc).
#[derive(Debug)]
pub struct Budgets {
    config: BudgetConfig,
    counters: Mutex<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    runs: HashMap<(String, String), Spent>,
    /// Runs in the order first seen, for forgetting the oldest.
    order: VecDeque<(String, String)>,
    /// (tenant, principal id) → window start, spent in it.
    principals: BTreeMap<(String, String), (u64, Spent)>,
}

impl Budgets {
    pub fn new(config: BudgetConfig) -> Self {
        Budgets {
            config,
            counters: Mutex::new(Counters::default()),
        }
    }

    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    /// Checks `spend` against `run`'s and `principal`'s budgets at `now_unix` and counts it in
    /// both, or refuses it and counts nothing.
    pub fn charge(
        &self,
        principal: &Principal,
        run: &str,
        spend: Spend,
        now_unix: u64,
    ) -> Result<(), Exhausted> {
        let mut counters = match self.counters.lock() {
            Ok(counters) => counters,
            // The counters are plain numbers: a panic elsewhere left them usable.
            Err(poisoned) => poisoned.into_inner(),
        };
        let window = self
            .config
            .principal_window_secs
            .unwrap_or(DEFAULT_PRINCIPAL_WINDOW_SECS)
            .max(1);
        let who = (principal.tenant.clone(), principal.id.clone());
        let run_key = (holder_key(principal), run.to_string());
        let run_spent = counters.runs.get(&run_key).copied().unwrap_or_default();
        let principal_spent = match counters.principals.get(&who) {
            Some((start, spent)) if now_unix.saturating_sub(*start) < window => *spent,
            _ => Spent::default(),
        };
        admit(&self.config.per_run, &run_spent, spend, Scope::Run)?;
        admit(
            &self.config.per_principal,
            &principal_spent,
            spend,
            Scope::Principal,
        )?;
        if !counters.runs.contains_key(&run_key) {
            counters.order.push_back(run_key.clone());
            while counters.order.len() > MAX_RUNS_KEPT {
                if let Some(oldest) = counters.order.pop_front() {
                    counters.runs.remove(&oldest);
                }
            }
        }
        add(counters.runs.entry(run_key).or_default(), spend);
        let entry = counters
            .principals
            .entry(who)
            .or_insert((now_unix, Spent::default()));
        if now_unix.saturating_sub(entry.0) >= window {
            *entry = (now_unix, Spent::default());
        }
        add(&mut entry.1, spend);
        Ok(())
    }

    /// What `run` of `principal` has spent.
    pub fn spent_by_run(&self, principal: &Principal, run: &str) -> Spent {
        let counters = match self.counters.lock() {
            Ok(counters) => counters,
            Err(poisoned) => poisoned.into_inner(),
        };
        counters
            .runs
            .get(&(holder_key(principal), run.to_string()))
            .copied()
            .unwrap_or_default()
    }
}

/// A run is the principal's own: two principals naming the same run id spend apart.
fn holder_key(principal: &Principal) -> String {
    crate::approval::holder(principal)
}

/// Where the call running in this task charges what it spends (set by the dispatcher around
/// a handler).
#[derive(Clone)]
pub struct BudgetScope {
    pub budgets: Arc<Budgets>,
    pub principal: Principal,
    pub run: String,
    pub clock: Arc<dyn crate::clock::Clock>,
}

tokio::task_local! {
    static IN_CALL: BudgetScope;
}

impl BudgetScope {
    /// `future` run with this scope as the one [`charge_in_call`] charges.
    pub async fn run<F: std::future::Future>(self, future: F) -> F::Output {
        IN_CALL.scope(self, future).await
    }
}

/// Charges `spend` to the run and principal of the call this task runs for; outside any call
/// with a budget (listing an upstream, a front end's own requests) nothing is charged.
pub fn charge_in_call(spend: Spend) -> Result<(), Exhausted> {
    match IN_CALL.try_with(Clone::clone) {
        Ok(scope) => {
            let now = crate::clock::unix_secs(scope.clock.now());
            scope
                .budgets
                .charge(&scope.principal, &scope.run, spend, now)
        }
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(calls: u64, writes: u64, tokens: u64) -> Limits {
        Limits {
            calls: Some(calls),
            writes: Some(writes),
            approvals: Some(1),
            outbound: Some(2),
            tokens: Some(tokens),
        }
    }

    #[test]
    fn nothing_past_a_limit_runs_and_a_limit_is_reachable_exactly() {
        let l = limits(3, 1, 100);
        let spent = |calls, writes, approvals, outbound, tokens| Spent {
            calls,
            writes,
            approvals,
            outbound,
            tokens,
        };
        let cases = [
            (
                "third call of three",
                spent(2, 0, 0, 0, 0),
                Spend::Call { writes: false },
                None,
            ),
            (
                "fourth call of three",
                spent(3, 0, 0, 0, 0),
                Spend::Call { writes: false },
                Some("calls"),
            ),
            (
                "a second write of one",
                spent(1, 1, 0, 0, 0),
                Spend::Call { writes: true },
                Some("writes"),
            ),
            (
                "a read after the one write",
                spent(1, 1, 0, 0, 0),
                Spend::Call { writes: false },
                None,
            ),
            (
                "a second approval of one",
                spent(0, 0, 1, 0, 0),
                Spend::Approval,
                Some("approvals"),
            ),
            (
                "a third request of two",
                spent(0, 0, 0, 2, 0),
                Spend::Outbound,
                Some("outbound requests"),
            ),
            (
                "tokens while some are left",
                spent(0, 0, 0, 0, 99),
                Spend::Tokens(500),
                None,
            ),
            (
                "tokens once all are used",
                spent(0, 0, 0, 0, 100),
                Spend::Tokens(1),
                Some("model tokens"),
            ),
        ];
        for (name, spent, spend, refused) in cases {
            let got = admit(&l, &spent, spend, Scope::Run).err().map(|e| e.kind);
            assert_eq!(got, refused, "{name}");
        }
    }

    #[test]
    fn unlimited_kinds_never_refuse() {
        let spent = Spent {
            calls: u64::MAX,
            ..Spent::default()
        };
        assert!(
            admit(
                &Limits::default(),
                &spent,
                Spend::Call { writes: true },
                Scope::Run
            )
            .is_ok()
        );
    }

    fn alice() -> Principal {
        Principal::local("alice", &[])
    }

    #[test]
    fn a_refused_spend_counts_nothing_and_runs_spend_apart() {
        let budgets = Budgets::new(BudgetConfig {
            per_run: limits(1, 1, 100),
            ..BudgetConfig::default()
        });
        let call = Spend::Call { writes: true };
        assert!(budgets.charge(&alice(), "run-1", call, 0).is_ok());
        let refused = budgets.charge(&alice(), "run-1", call, 0).unwrap_err();
        assert_eq!(
            (refused.scope, refused.kind, refused.limit),
            (Scope::Run, "calls", 1)
        );
        assert_eq!(budgets.spent_by_run(&alice(), "run-1").calls, 1);
        assert!(budgets.charge(&alice(), "run-2", call, 0).is_ok());
        let bob = Principal::local("bob", &[]);
        assert!(
            budgets.charge(&bob, "run-1", call, 0).is_ok(),
            "bob's run-1 is not alice's"
        );
    }

    #[test]
    fn a_principals_budget_spans_runs_and_starts_again_after_its_window() {
        let budgets = Budgets::new(BudgetConfig {
            per_principal: limits(2, 2, 100),
            principal_window_secs: Some(60),
            ..BudgetConfig::default()
        });
        let call = Spend::Call { writes: false };
        assert!(budgets.charge(&alice(), "a", call, 0).is_ok());
        assert!(budgets.charge(&alice(), "b", call, 10).is_ok());
        let refused = budgets.charge(&alice(), "c", call, 59).unwrap_err();
        assert_eq!(refused.scope, Scope::Principal);
        assert!(
            budgets.charge(&alice(), "d", call, 60).is_ok(),
            "a new window"
        );
    }

    #[test]
    fn concurrent_spenders_never_pass_the_limit() {
        let budgets = Arc::new(Budgets::new(BudgetConfig {
            per_run: limits(50, 50, 100),
            ..BudgetConfig::default()
        }));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let budgets = Arc::clone(&budgets);
                std::thread::spawn(move || {
                    (0..20)
                        .filter(|_| {
                            budgets
                                .charge(&alice(), "run", Spend::Call { writes: false }, 0)
                                .is_ok()
                        })
                        .count()
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(admitted, 50);
        assert_eq!(budgets.spent_by_run(&alice(), "run").calls, 50);
    }
}
