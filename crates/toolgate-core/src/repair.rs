//! The nearest accepted call: a refused call with each refused top-level field replaced by the
//! one value the schema makes obvious, offered to the model as `retry_with`.
//!
//! Why: a small model told only "`limit` must be from 1 to 50" tells the user the fix instead of
//! making it (measured in issue 15), and when it does call again it often drops other arguments.
//! A whole call it can copy removes both steps. No schema library proposes repairs, so this is
//! our own, kept to cases with a single defensible answer.
//!
//! Guarantees: only the refused fields change, each by one rule: a number beyond an inclusive
//! bound becomes the bound; a string that is a near spelling of exactly one allowed value (edit
//! distance at most 2, or one contains the other) becomes that value; a number written as text
//! becomes the number; a placeholder (`""`, `"none"`, `"null"`, `"any"`, `"all"`) refused in an
//! optional field (wrong type, too short, not an allowed value, wrong pattern or format) is left
//! out; an unknown field whose name is a near spelling of one free field is
//! renamed. Refuses (returns `None`) when any violation has no such rule, sits below the top
//! level, or is ambiguous (two allowed values equally near). The caller re-validates the repaired
//! call and offers it only when the schema accepts it: a repair never bypasses validation, and the
//! model still decides whether the repaired call matches what the user asked.

use serde_json::{Map, Value};

use crate::schema::{self, Violation, ViolationKind};

/// Placeholders a model writes for "no value" in an optional field.
const PLACEHOLDERS: [&str; 5] = ["", "none", "null", "any", "all"];

/// The call `arguments` with every violation repaired, or `None` if one cannot be.
pub fn nearest_accepted_call(
    input_schema: &Value,
    arguments: &Value,
    violations: &[Violation],
) -> Option<Value> {
    let mut fixed: Map<String, Value> = arguments.as_object()?.clone();
    if violations.is_empty() {
        return None;
    }
    for violation in violations {
        let field = top_level_field(&violation.path)?;
        let received = fixed.get(field)?.clone();
        match repair(input_schema, field, &received, &violation.kind, &fixed)? {
            Repair::Set(value) => {
                fixed.insert(field.to_string(), value);
            }
            Repair::Remove => {
                fixed.remove(field);
            }
            Repair::Rename(to) => {
                fixed.remove(field);
                fixed.insert(to, received);
            }
        }
    }
    Some(Value::Object(fixed))
}

enum Repair {
    Set(Value),
    Remove,
    Rename(String),
}

fn top_level_field(path: &str) -> Option<&str> {
    let plain = path != "$" && !path.contains(['.', '[']);
    plain.then_some(path)
}

fn repair(
    input_schema: &Value,
    field: &str,
    received: &Value,
    kind: &ViolationKind,
    call: &Map<String, Value>,
) -> Option<Repair> {
    let placeholder_refused = matches!(
        kind,
        ViolationKind::WrongType
            | ViolationKind::BadLength
            | ViolationKind::NotInEnum
            | ViolationKind::PatternMismatch
            | ViolationKind::BadFormat
    );
    if placeholder_refused && received.as_str().is_some_and(is_placeholder) {
        return (!schema::is_required(input_schema, field)).then_some(Repair::Remove);
    }
    match kind {
        ViolationKind::UnknownField => {
            let free = schema::fields_at(input_schema, field)
                .into_iter()
                .filter(|name| !call.contains_key(name));
            nearest_spelling(field, free).map(Repair::Rename)
        }
        ViolationKind::OutOfRange => {
            let property = schema::property_schema(input_schema, field)?;
            clamp(received, property).map(Repair::Set)
        }
        ViolationKind::NotInEnum => {
            let property = schema::property_schema(input_schema, field)?;
            let allowed = property
                .get("enum")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string);
            nearest_spelling(received.as_str()?, allowed)
                .map(|value| Repair::Set(Value::String(value)))
        }
        ViolationKind::WrongType => {
            let text = received.as_str()?;
            let property = schema::property_schema(input_schema, field)?;
            number_from_text(text, property).map(Repair::Set)
        }
        ViolationKind::MissingField
        | ViolationKind::BadLength
        | ViolationKind::PatternMismatch
        | ViolationKind::BadFormat
        | ViolationKind::DuplicateItems
        | ViolationKind::NoAlternativeMatched
        | ViolationKind::SeveralAlternativesMatched
        | ViolationKind::NotAllowed => None,
    }
}

fn is_placeholder(text: &str) -> bool {
    PLACEHOLDERS.contains(&text.trim().to_lowercase().as_str())
}

/// The one candidate that is a near spelling of `wanted`; `None` when none is, or two are
/// equally near.
fn nearest_spelling(wanted: &str, candidates: impl IntoIterator<Item = String>) -> Option<String> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, String)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let lower = candidate.to_lowercase();
            let contains = !wanted_lower.is_empty()
                && (lower.contains(&wanted_lower) || wanted_lower.contains(&lower));
            let distance = if contains {
                0
            } else {
                schema::edit_distance(&wanted_lower, &lower)
            };
            (distance <= 2).then_some((distance, candidate))
        })
        .collect();
    scored.sort();
    match scored.as_slice() {
        [(_, only)] => Some(only.clone()),
        [(best, first), (second, _), ..] if best < second => Some(first.clone()),
        _ => None,
    }
}

fn accepts(property: &Value, type_name: &str) -> bool {
    match property.get("type") {
        Some(Value::String(t)) => t == type_name,
        Some(Value::Array(types)) => types.iter().any(|t| t.as_str() == Some(type_name)),
        _ => false,
    }
}

/// A number beyond an inclusive bound, moved onto the bound (exclusive bounds have no nearest
/// number in general, so they are refused).
fn clamp(received: &Value, property: &Value) -> Option<Value> {
    let number = received.as_f64()?;
    let bound = if property
        .get("maximum")
        .and_then(Value::as_f64)
        .is_some_and(|max| number > max)
    {
        property.get("maximum")?
    } else if property
        .get("minimum")
        .and_then(Value::as_f64)
        .is_some_and(|min| number < min)
    {
        property.get("minimum")?
    } else {
        return None;
    };
    if accepts(property, "integer") {
        bound.as_f64().map(|b| Value::from(b as i64))
    } else {
        Some(bound.clone())
    }
}

fn number_from_text(text: &str, property: &Value) -> Option<Value> {
    let text = text.trim();
    if accepts(property, "integer") {
        return text.parse::<i64>().ok().map(Value::from);
    }
    if accepts(property, "number") {
        return text
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Value::from);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::CompiledSchema;
    use serde_json::json;

    fn search_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "author": {"type": "string"},
                "year_min": {"type": ["integer", "null"]},
                "rating_min": {"type": "number", "minimum": 0.0, "maximum": 5.0},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "sort": {"type": "string", "enum": ["popularity", "rating_desc", "rating_asc", "title"]},
                "shelf": {"type": "string", "enum": ["read", "reading", "want_to_read"]},
                "query": {"type": "string"},
                "language": {"type": "string", "minLength": 2, "maxLength": 10}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    /// The repaired call, as the dispatcher would offer it: only if the schema accepts it.
    fn offered(arguments: Value) -> Option<Value> {
        let schema = search_schema();
        let compiled = CompiledSchema::declared(&schema, false).unwrap();
        let violations = compiled.validate(&arguments);
        assert!(!violations.is_empty(), "the call must be refused first");
        let fixed = nearest_accepted_call(compiled.model_schema(), &arguments, &violations)?;
        compiled.validate(&fixed).is_empty().then_some(fixed)
    }

    #[test]
    fn a_limit_beyond_the_maximum_is_offered_the_maximum_with_other_arguments_kept() {
        let cases = [
            (
                json!({"query": "king", "limit": 100}),
                json!({"query": "king", "limit": 50}),
            ),
            (
                json!({"query": "king", "limit": 0}),
                json!({"query": "king", "limit": 1}),
            ),
            (
                json!({"query": "x", "rating_min": 7.5, "author": "Stephen King"}),
                json!({"query": "x", "rating_min": 5.0, "author": "Stephen King"}),
            ),
        ];
        for (call, want) in cases {
            assert_eq!(offered(call.clone()), Some(want), "{call}");
        }
    }

    #[test]
    fn a_near_spelling_of_one_allowed_value_is_offered_that_value() {
        let cases = [
            ("popularity_desc", Some("popularity")),
            ("Title", Some("title")),
            ("rating", None), // rating_desc and rating_asc are equally near: no guess
            ("language", None),
        ];
        for (sent, want) in cases {
            let got = offered(json!({"query": "q", "sort": sent}));
            let want = want.map(|w| json!({"query": "q", "sort": w}));
            assert_eq!(got, want, "{sent}");
        }
    }

    #[test]
    fn a_placeholder_in_an_optional_field_is_left_out_but_never_in_a_required_one() {
        assert_eq!(
            offered(json!({"query": "q", "year_min": "none", "limit": 5})),
            Some(json!({"query": "q", "limit": 5}))
        );
        assert_eq!(
            offered(json!({"query": "q", "year_min": ""})),
            Some(json!({"query": "q"}))
        );
        for (field, placeholder) in [("language", ""), ("sort", "none"), ("shelf", "any")] {
            assert_eq!(
                offered(json!({"query": "q", field: placeholder, "limit": 5})),
                Some(json!({"query": "q", "limit": 5})),
                "{field}: {placeholder}"
            );
        }
        assert_eq!(offered(json!({"query": 0, "year_min": 1990})), None);
    }

    #[test]
    fn a_number_written_as_text_becomes_the_number() {
        assert_eq!(
            offered(json!({"query": "q", "year_min": "1990"})),
            Some(json!({"query": "q", "year_min": 1990}))
        );
        assert_eq!(
            offered(json!({"query": "q", "year_min": "nineteen ninety"})),
            None
        );
    }

    #[test]
    fn a_misspelt_field_is_renamed_only_to_a_free_field() {
        assert_eq!(
            offered(json!({"query": "q", "auther": "King"})),
            Some(json!({"query": "q", "author": "King"}))
        );
        assert_eq!(
            offered(json!({"query": "q", "author": "A", "auther": "B"})),
            None
        );
    }

    #[test]
    fn one_unrepairable_violation_offers_no_call_at_all() {
        assert_eq!(
            offered(json!({"limit": 100})),
            None,
            "missing required query"
        );
        assert_eq!(
            offered(json!({"query": "q", "limit": 100, "sort": "newest"})),
            None
        );
        assert_eq!(
            offered(json!({"query": "q", "limit": 100, "sort": "popularity_desc"})),
            Some(json!({"query": "q", "limit": 50, "sort": "popularity"})),
            "two repairable violations are both repaired"
        );
    }
}
