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

/// The decision every ledger makes inside its redeeming transaction. The ledgers themselves
/// (SQLite and PostgreSQL) are held to the same table end to end in
/// `crates/toolgate-store/tests/ticket_ledgers.rs`.
#[test]
fn redeemable_refuses_every_ticket_but_the_callers_own_unused_unexpired_one() {
    let alice = holder(&user("acme", "alice"));
    let ticket = |used_at_unix| TicketState {
        binding: "bind-a".into(),
        holder: alice.clone(),
        expires_at_unix: 1_060,
        used_at_unix,
        awaits_inbox_yes: false,
    };
    let fresh = ticket(None);
    let used = ticket(Some(1_010));
    let inbox_undecided = TicketState {
        awaits_inbox_yes: true,
        ..fresh.clone()
    };
    let cases = [
        (
            "an unknown token",
            None,
            "bind-a",
            alice.clone(),
            1_000,
            Err(Denial::UnknownTicket),
        ),
        (
            "another caller",
            Some(&fresh),
            "bind-a",
            holder(&user("acme", "mallory")),
            1_000,
            Err(Denial::OtherCaller),
        ),
        (
            "the same name in another tenant",
            Some(&fresh),
            "bind-a",
            holder(&user("globex", "alice")),
            1_000,
            Err(Denial::OtherCaller),
        ),
        (
            "tenant and id run together",
            Some(&fresh),
            "bind-a",
            holder(&user("", "acmealice")),
            1_000,
            Err(Denial::OtherCaller),
        ),
        (
            "a bare id from before tenants",
            Some(&fresh),
            "bind-a",
            "alice".into(),
            1_000,
            Err(Denial::OtherCaller),
        ),
        (
            "another call",
            Some(&fresh),
            "bind-b",
            alice.clone(),
            1_000,
            Err(Denial::BoundToOtherCall),
        ),
        (
            "a second use",
            Some(&used),
            "bind-a",
            alice.clone(),
            1_020,
            Err(Denial::AlreadyUsed),
        ),
        (
            "at its expiry",
            Some(&fresh),
            "bind-a",
            alice.clone(),
            1_060,
            Err(Denial::Expired),
        ),
        (
            "an inbox ticket no person approved, whose token the host holds",
            Some(&inbox_undecided),
            "bind-a",
            alice.clone(),
            1_000,
            Err(Denial::Declined {
                reason: INBOX_ONLY_REASON.into(),
            }),
        ),
        (
            "the right call in time",
            Some(&fresh),
            "bind-a",
            alice.clone(),
            1_059,
            Ok(()),
        ),
    ];
    for (label, state, binding, caller, now, want) in cases {
        assert_eq!(redeemable(state, binding, &caller, now), want, "{label}");
    }
}
