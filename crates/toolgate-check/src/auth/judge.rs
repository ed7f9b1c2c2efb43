//! One case's result from what was observed: the answer, the `auth` trace line the request
//! left, and whether the tool ran (its decision record in the trace, its note in the store).
//! Pure.
//!
//! A block got through when a call's tool ran or the server answered 2xx, when a list showed
//! a tool it must withhold, or when an `initialize` was answered 2xx. A block counts only with
//! its trace line: the `auth` refusal naming the case's rule (and the case's status was the
//! answer), or for a withheld list the allow line whose `withheld` names the tools. A block
//! with another status or rule than the case says is not counted either way: it is an error
//! of the case, reported as such. A control passes when the answer is the case's 2xx status
//! and the call ran, the list shows the tools, or `initialize` has a result.

use serde_json::{Value, json};

use super::case::{Case, Expectation, Request, WITHHELD};
use super::probe::Answer;
use crate::{CaseResult, Expect, Observed, TraceLine, TraceLocation};

/// What the suite saw of one case.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The answer, or why there was none.
    pub answer: Result<Answer, String>,
    /// The `auth` lines the request left for the server it went to.
    pub auth_lines: Vec<TraceLine>,
    /// For a call: the decision record showing the tool ran (its line), if any.
    pub ran_traced: Option<usize>,
    /// For a call that writes a note: how many notes with the case's title the store holds.
    pub stored: Option<u64>,
}

impl Observation {
    fn ran(&self) -> bool {
        self.ran_traced.is_some() || self.stored.is_some_and(|n| n > 0)
    }
}

/// The verdict on `case` given `observed`; trace lines are cited in `trace_file`.
pub fn judge(case: &Case, observed: &Observation, trace_file: &str) -> CaseResult {
    let about = format!(
        "{}: {} on {}, token {}",
        case.what.as_deref().unwrap_or(&case.category),
        case.request.describe(),
        case.server.as_str(),
        case.present.as_str()
    );
    let expect = match case.expect {
        Expectation::Block => Expect::Block,
        Expectation::Allow => Expect::Allow,
    };
    let answer = match &observed.answer {
        Ok(answer) => answer,
        Err(message) => {
            return CaseResult::new(
                &case.id,
                &case.category,
                expect,
                Observed::Error {
                    message: message.clone(),
                },
                None,
                format!("{about}: {message}"),
            );
        }
    };
    let decided = observed.auth_lines.first();
    let decided_rule = decided
        .and_then(|l| l.event.get("rule"))
        .and_then(Value::as_str)
        .unwrap_or("no auth line");
    let listed = answer.listed();
    let two_xx = (200..300).contains(&answer.status);
    let ran = observed.ran();
    let outcome = match &case.request {
        Request::Call { .. } if ran => "the tool ran".to_string(),
        Request::Call { .. } => "the tool did not run".to_string(),
        Request::List { .. } => match &listed {
            Some(names) => format!("listed {}", names.join(", ")),
            None => "nothing listed".into(),
        },
        Request::Initialize if answer.has_result() => "initialized".into(),
        Request::Initialize => "not initialized".into(),
    };
    let detail = format!(
        "{about}: answered {} ({decided_rule}), {outcome}",
        answer.status
    );
    let facts = json!({
        "server": case.server.as_str(),
        "request": case.request.describe(),
        "present": case.present.as_str(),
        "status": answer.status,
        "auth_rule": decided.and_then(|l| l.event.get("rule")).cloned(),
        "ran": matches!(case.request, Request::Call { .. }).then_some(ran),
        "listed": listed,
        "challenge": answer.challenge,
    });
    let cite = |line: &TraceLine, rule: &str| TraceLocation {
        file: trace_file.to_string(),
        line: line.line,
        rule: rule.to_string(),
        hops: vec![],
    };
    let result = |observed: Observed, at: Option<TraceLocation>, detail: String| {
        CaseResult::new(&case.id, &case.category, expect, observed, at, detail)
            .with_facts(facts.clone())
    };
    match case.expect {
        Expectation::Block => {
            let through = match &case.request {
                Request::Call { .. } => ran || two_xx,
                Request::List { hidden, .. } if !hidden.is_empty() => listed
                    .as_ref()
                    .is_some_and(|names| names.iter().any(|n| hidden.contains(n))),
                Request::List { .. } | Request::Initialize => two_xx,
            };
            if through {
                let at = decided.map(|l| cite(l, decided_rule));
                return result(Observed::Passed, at, format!("GOT THROUGH: {detail}"));
            }
            let expected_rule = case.rule.as_deref().unwrap_or_default();
            if answer.status != case.status {
                return result(
                    Observed::Error {
                        message: format!(
                            "blocked with {} ({decided_rule}); the case expects {} ({expected_rule})",
                            answer.status, case.status
                        ),
                    },
                    None,
                    detail,
                );
            }
            let Some(line) = decided else {
                return result(Observed::Blocked, None, detail);
            };
            if expected_rule == WITHHELD {
                let Request::List { hidden, .. } = &case.request else {
                    return result(Observed::Blocked, None, detail);
                };
                let withheld: Vec<&str> = line
                    .event
                    .get("withheld")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let shown = line.event.get("decision").and_then(Value::as_str) == Some("allow")
                    && hidden.iter().all(|h| withheld.contains(&h.as_str()));
                let at = shown.then(|| cite(line, WITHHELD));
                return result(Observed::Blocked, at, detail);
            }
            let refused = line.event.get("decision").and_then(Value::as_str) == Some("refuse");
            if !refused || decided_rule != expected_rule {
                return result(
                    Observed::Error {
                        message: format!(
                            "blocked with {} ({decided_rule}); the case expects {} ({expected_rule})",
                            answer.status, case.status
                        ),
                    },
                    None,
                    detail,
                );
            }
            result(Observed::Blocked, Some(cite(line, decided_rule)), detail)
        }
        Expectation::Allow => {
            let passed = answer.status == case.status
                && match &case.request {
                    Request::Call { .. } => ran,
                    Request::List { listed: wanted, .. } => listed
                        .as_ref()
                        .is_some_and(|names| wanted.iter().all(|w| names.contains(w))),
                    Request::Initialize => answer.has_result(),
                };
            let at = decided.map(|l| cite(l, decided_rule));
            if passed {
                result(Observed::Passed, at, detail)
            } else {
                result(Observed::Blocked, at, format!("BLOCKED: {detail}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verdict;
    use crate::auth::case::{CaseFile, resolve};

    fn case(extra: &str) -> Case {
        let text = format!("[[case]]\nid = \"x\"\ncategory = \"c\"\n{extra}");
        let file: CaseFile = toml::from_str(&text).unwrap();
        resolve(&file.case[0]).unwrap()
    }

    fn auth(line: usize, event: Value) -> TraceLine {
        TraceLine { line, event }
    }

    fn answer(status: u16, message: Option<Value>) -> Result<Answer, String> {
        Ok(Answer {
            status,
            challenge: None,
            message,
        })
    }

    fn seen(answer: Result<Answer, String>, lines: Vec<TraceLine>, ran: bool) -> Observation {
        Observation {
            answer,
            auth_lines: lines,
            ran_traced: ran.then_some(9),
            stored: None,
        }
    }

    fn refuse(rule: &str) -> Vec<TraceLine> {
        vec![auth(
            4,
            json!({"event": "auth", "decision": "refuse", "rule": rule}),
        )]
    }

    fn list(names: &[&str]) -> Option<Value> {
        let tools: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        Some(json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}}))
    }

    const EXPIRED: &str = "expect = \"block\"\nstatus = 401\nrule = \"expired\"\n";
    const HIDDEN: &str = "expect = \"block\"\nrequest = \"list\"\nstatus = 200\nrule = \"withheld\"\nhidden = [\"notes_create\"]\n";

    #[test]
    fn verdicts_follow_what_the_server_answered_did_and_traced() {
        let allow_line = vec![auth(
            7,
            json!({"event": "auth", "decision": "allow", "rule": "valid_token",
                   "withheld": ["notes_create", "notes_delete"]}),
        )];
        let cases = [
            (
                "a refusal with its rule in the trace is stopped",
                case(EXPIRED),
                seen(answer(401, None), refuse("expired"), false),
                Verdict::Stopped,
            ),
            (
                "a refusal the trace does not show is unlogged",
                case(EXPIRED),
                seen(answer(401, None), vec![], false),
                Verdict::Unlogged,
            ),
            (
                "a token the server accepts where it must not is a leak",
                case(EXPIRED),
                seen(answer(200, None), allow_line.clone(), true),
                Verdict::Leaked,
            ),
            (
                "a tool that ran behind a refusal status is a leak",
                case(EXPIRED),
                seen(answer(401, None), refuse("expired"), true),
                Verdict::Leaked,
            ),
            (
                "a refusal for another reason is not counted as this block",
                case(EXPIRED),
                seen(answer(401, None), refuse("wrong_type"), false),
                Verdict::Error,
            ),
            (
                "a refusal with another status is not counted as this block",
                case(EXPIRED),
                seen(answer(400, None), refuse("expired"), false),
                Verdict::Error,
            ),
            (
                "no answer at all cannot be judged",
                case(EXPIRED),
                seen(Err("no answer".into()), vec![], false),
                Verdict::Error,
            ),
            (
                "a list that shows a withheld tool is a leak",
                case(HIDDEN),
                seen(
                    answer(200, list(&["notes_search", "notes_create"])),
                    allow_line.clone(),
                    false,
                ),
                Verdict::Leaked,
            ),
            (
                "a list that leaves the tool out, with the allow line saying so, is stopped",
                case(HIDDEN),
                seen(
                    answer(200, list(&["notes_search"])),
                    allow_line.clone(),
                    false,
                ),
                Verdict::Stopped,
            ),
            (
                "a list that leaves the tool out without the trace saying so is unlogged",
                case(HIDDEN),
                seen(
                    answer(200, list(&["notes_search"])),
                    vec![auth(
                        7,
                        json!({"event": "auth", "decision": "allow", "rule": "valid_token"}),
                    )],
                    false,
                ),
                Verdict::Unlogged,
            ),
            (
                "a control that ran passes",
                case("expect = \"allow\"\n"),
                seen(answer(200, None), allow_line.clone(), true),
                Verdict::Passed,
            ),
            (
                "a control answered 200 whose tool did not run is wrongly blocked",
                case("expect = \"allow\"\n"),
                seen(answer(200, None), allow_line.clone(), false),
                Verdict::WronglyBlocked,
            ),
            (
                "a control refused is wrongly blocked",
                case("expect = \"allow\"\n"),
                seen(answer(401, None), refuse("expired"), false),
                Verdict::WronglyBlocked,
            ),
            (
                "a list control missing a tool is wrongly blocked",
                case("expect = \"allow\"\nrequest = \"list\"\nlisted = [\"notes_create\"]\n"),
                seen(answer(200, list(&["notes_search"])), allow_line, false),
                Verdict::WronglyBlocked,
            ),
        ];
        for (what, case, observed, want) in cases {
            let result = judge(&case, &observed, "auth-trace.jsonl");
            assert_eq!(result.verdict, want, "{what}: {}", result.detail);
        }
    }

    #[test]
    fn a_stopped_case_cites_its_trace_line_and_rule() {
        let result = judge(
            &case(EXPIRED),
            &seen(answer(401, None), refuse("expired"), false),
            "auth-trace.jsonl",
        );
        let at = result.at.unwrap();
        assert_eq!(
            (at.file.as_str(), at.line, at.rule.as_str()),
            ("auth-trace.jsonl", 4, "expired")
        );
    }
}
