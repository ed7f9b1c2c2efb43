use super::*;
use serde_json::json;

#[test]
fn approval_needed_table() {
    let cases = [
        (Risk::Low, Mode::Auto, false),
        (Risk::Low, Mode::Ask, false),
        (Risk::Medium, Mode::Auto, false),
        (Risk::Medium, Mode::Ask, true),
        (Risk::High, Mode::Auto, true),
        (Risk::High, Mode::Ask, true),
    ];
    for (risk, mode, needed) in cases {
        assert_eq!(approval_needed(risk, mode), needed, "{risk:?} in {mode:?}");
    }
}

fn user(tenant: &str, id: &str) -> Principal {
    let mut p = Principal::local(id, &[]);
    p.tenant = tenant.into();
    p
}

#[test]
fn binding_changes_with_every_bound_part_but_not_key_order() {
    let alice = user("acme", "alice");
    let base = binding_hash("email_send", 1, &json!({"a": 1, "b": 2}), &alice);
    assert_eq!(
        base,
        binding_hash("email_send", 1, &json!({"b": 2, "a": 1}), &alice)
    );
    for other in [
        binding_hash("email_draft", 1, &json!({"a": 1, "b": 2}), &alice),
        binding_hash("email_send", 2, &json!({"a": 1, "b": 2}), &alice),
        binding_hash("email_send", 1, &json!({"a": 1, "b": 3}), &alice),
        binding_hash(
            "email_send",
            1,
            &json!({"a": 1, "b": 2}),
            &user("acme", "mallory"),
        ),
        binding_hash(
            "email_send",
            1,
            &json!({"a": 1, "b": 2}),
            &user("globex", "alice"),
        ),
        // Parts are length-prefixed: moving text between tenant and id is another caller.
        binding_hash(
            "email_send",
            1,
            &json!({"a": 1, "b": 2}),
            &user("acmea", "lice"),
        ),
    ] {
        assert_ne!(base, other);
    }
}

#[test]
fn redeem_table() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let ttl = Duration::from_secs(60);
    let ledger = ApprovalLedger::in_memory().unwrap();
    let alice = user("acme", "alice");
    let token = ledger.issue("bind-a", &alice, t0, ttl).unwrap();
    let cases = [
        (
            "an unknown token",
            "nope",
            "bind-a",
            alice.clone(),
            t0,
            Err(Denial::UnknownTicket),
        ),
        (
            "another caller",
            token.as_str(),
            "bind-a",
            user("acme", "mallory"),
            t0,
            Err(Denial::OtherCaller),
        ),
        (
            "the same name in another tenant",
            token.as_str(),
            "bind-a",
            user("globex", "alice"),
            t0,
            Err(Denial::OtherCaller),
        ),
        (
            "tenant and id run together",
            token.as_str(),
            "bind-a",
            user("", "acmealice"),
            t0,
            Err(Denial::OtherCaller),
        ),
        (
            "another call",
            token.as_str(),
            "bind-b",
            alice.clone(),
            t0,
            Err(Denial::BoundToOtherCall),
        ),
        (
            "the right call",
            token.as_str(),
            "bind-a",
            alice.clone(),
            t0,
            Ok(()),
        ),
        (
            "a second use",
            token.as_str(),
            "bind-a",
            alice.clone(),
            t0,
            Err(Denial::AlreadyUsed),
        ),
    ];
    for (label, token, binding, principal, now, want) in cases {
        assert_eq!(
            ledger.redeem(token, binding, &principal, now),
            want,
            "{label}"
        );
    }
    let late = ledger.issue("bind-a", &alice, t0, ttl).unwrap();
    assert_eq!(
        ledger.redeem(&late, "bind-a", &alice, t0 + ttl),
        Err(Denial::Expired)
    );
    assert_ne!(
        token, late,
        "tokens are unique even for the same binding and time"
    );
    let declined = ledger.issue("bind-a", &alice, t0, ttl).unwrap();
    ledger.spend(&declined, t0).unwrap();
    assert_eq!(
        ledger.redeem(&declined, "bind-a", &alice, t0),
        Err(Denial::AlreadyUsed),
        "a declined ticket cannot be redeemed with a yes later"
    );
}
