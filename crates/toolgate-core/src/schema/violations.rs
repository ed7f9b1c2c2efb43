//! Validation against a compiled schema, and the violations it reports in words a model can
//! act on.
//!
//! Guarantees: a [`CompiledSchema`] is compiled once, with the `jsonschema` crate (draft
//! 2020-12, the linear-time `regex` engine for `pattern`, our `date`, `email` and `uri`
//! checks). [`CompiledSchema::validate`] is pure, costs one pass of the compiled validator and
//! no allocation for a valid value, and reports every violation with its path (`filters.year`,
//! `ids[2]`, `$` for the whole value), its kind, what was expected in words and what was
//! received: a value of the wrong type is reported once, not again for each rule it then
//! breaks; a `oneOf`/`anyOf` failure lists the alternatives and, when one came close, why it
//! failed; a required field given as `null` is missing. For derived schemas an optional field
//! given as `null` is absent (serde reads it as `None`); declared schemas keep JSON Schema's
//! meaning of `null`.
//!
//! Refuses: to fetch anything (every retrieval fails: the second lock behind the
//! declared-schema guards), a `format` it does not know, and a schema the validator cannot
//! compile ([`SchemaError::Malformed`]).

use serde_json::Value;

use super::SchemaError;
use super::declared::check_declared;
use super::describe::{alternatives, describe_in, fields_of};
use super::formats::{format_matches, is_iso_date};
use super::structure::resolve_ref;

/// One way a value fails its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// JSON path of the offending value (`$` is the whole argument object).
    pub path: String,
    pub kind: ViolationKind,
    /// What the schema asks for at that path, in words.
    pub expected: String,
    /// The offending value (`None` when the field is missing).
    pub received: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViolationKind {
    UnknownField,
    MissingField,
    WrongType,
    NotInEnum,
    OutOfRange,
    BadLength,
    PatternMismatch,
    BadFormat,
    DuplicateItems,
    /// `oneOf`/`anyOf`: the value fits none of the alternatives (`expected` lists them).
    NoAlternativeMatched,
    /// `oneOf`: the value fits more than one alternative.
    SeveralAlternativesMatched,
    /// Any other constraint (`not`, `false`, `contains`, dependencies...).
    NotAllowed,
}

/// Checks `value` against a normalized schema, compiling it first; returns every violation.
/// Hot paths hold a [`CompiledSchema`] instead.
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    match CompiledSchema::derived(schema) {
        Ok(compiled) => compiled.validate(value),
        Err(e) => vec![Violation {
            path: "$".into(),
            kind: ViolationKind::NotAllowed,
            expected: format!("a value of a valid schema ({e})"),
            received: Some(value.clone()),
        }],
    }
}

/// A tool's input schema compiled once, at declaration; validating a call walks the compiled
/// form only.
pub struct CompiledSchema {
    /// The schema as the model sees it; error messages describe its subschemas.
    model: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles a schema [`normalize`](super::normalize) produced for a Rust type. An optional
    /// field given as `null` is accepted as absent (serde reads it as `None`), as
    /// [`normalize`](super::normalize) promises.
    pub fn derived(schema: &Value) -> Result<Self, SchemaError> {
        let mut validating = schema.clone();
        accept_null_for_optionals(&mut validating);
        Self::build(schema.clone(), &validating)
    }

    /// Compiles a declared (runtime) schema after [`check_declared`]. JSON Schema's own
    /// semantics apply: `null` is a value like any other.
    pub fn declared(schema: &Value, allow_open: bool) -> Result<Self, SchemaError> {
        check_declared(schema, allow_open)?;
        Self::build(schema.clone(), schema)
    }

    fn build(model: Value, validating: &Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .with_retriever(RefuseRetrieval)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
            .with_format("date", is_iso_date)
            .with_format("email", |text: &str| format_matches("email", text))
            .with_format("uri", |text: &str| format_matches("uri", text))
            // The linear-time engine: no pattern can backtrack for ever.
            .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(1 << 20))
            .build(validating)
            .map_err(|e| SchemaError::Malformed {
                path: format!("#{}", e.instance_path().as_str()),
                reason: e.to_string(),
            })?;
        Ok(CompiledSchema { model, validator })
    }

    /// The schema as the model sees it.
    pub fn model_schema(&self) -> &Value {
        &self.model
    }

    /// Every violation of `value`; empty when it is valid. A valid value costs one pass of the
    /// compiled validator and no allocation.
    pub fn validate(&self, value: &Value) -> Vec<Violation> {
        if self.validator.is_valid(value) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for error in self.validator.iter_errors(value) {
            self.push_violations(&error, &mut out);
        }
        // A value of the wrong type is reported once, not again for each rule it then breaks.
        let wrong_type: Vec<String> = out
            .iter()
            .filter(|v| v.kind == ViolationKind::WrongType)
            .map(|v| v.path.clone())
            .collect();
        out.retain(|v| {
            matches!(
                v.kind,
                ViolationKind::WrongType
                    | ViolationKind::NoAlternativeMatched
                    | ViolationKind::SeveralAlternativesMatched
            ) || !wrong_type.contains(&v.path)
        });
        out
    }

    /// The subschema an error's keyword sits in, and the keyword's parent segments.
    fn subschema_of(&self, error: &jsonschema::ValidationError<'_>) -> (Vec<String>, &Value) {
        let keyword = error.kind().keyword();
        let mut segments: Vec<String> = error
            .schema_path()
            .as_str()
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        if let Some(at) = segments.iter().rposition(|s| s == keyword) {
            segments.truncate(at);
        }
        let sub = walk_schema(&self.model, &segments).unwrap_or(&Value::Null);
        (segments, sub)
    }

    fn push_violations(&self, error: &jsonschema::ValidationError<'_>, out: &mut Vec<Violation>) {
        use jsonschema::error::ValidationErrorKind as K;
        let path = instance_path(error.instance_path());
        let instance: &Value = error.instance();
        let (segments, sub) = self.subschema_of(error);
        let expected = describe_in(&self.model, sub);
        let plain = |kind: ViolationKind| Violation {
            path: path.clone(),
            kind,
            expected: expected.clone(),
            received: Some(instance.clone()),
        };
        match error.kind() {
            K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
                let mut allowed = fields_of(&self.model, sub);
                allowed.sort_unstable();
                for name in unexpected {
                    out.push(Violation {
                        path: join(&path, name),
                        kind: ViolationKind::UnknownField,
                        expected: format!("one of the fields: {}", allowed.join(", ")),
                        received: instance.get(name).cloned(),
                    });
                }
            }
            K::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                let field = sub
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .map(|f| describe_in(&self.model, f))
                    .unwrap_or_default();
                out.push(Violation {
                    path: join(&path, name),
                    kind: ViolationKind::MissingField,
                    expected: field,
                    received: None,
                });
            }
            K::Type { .. } => {
                let required_null = instance.is_null()
                    && segments.len() >= 2
                    && segments[segments.len() - 2] == "properties"
                    && walk_schema(&self.model, &segments[..segments.len() - 2])
                        .and_then(|parent| parent.get("required"))
                        .and_then(Value::as_array)
                        .is_some_and(|r| {
                            r.iter()
                                .any(|n| n.as_str() == segments.last().map(String::as_str))
                        });
                if required_null {
                    out.push(Violation {
                        path,
                        kind: ViolationKind::MissingField,
                        expected,
                        received: None,
                    });
                } else {
                    out.push(plain(ViolationKind::WrongType));
                }
            }
            K::Enum { .. } | K::Constant { .. } => out.push(plain(ViolationKind::NotInEnum)),
            K::Minimum { .. }
            | K::Maximum { .. }
            | K::ExclusiveMinimum { .. }
            | K::ExclusiveMaximum { .. }
            | K::MultipleOf { .. } => out.push(plain(ViolationKind::OutOfRange)),
            K::MinLength { .. }
            | K::MaxLength { .. }
            | K::MinItems { .. }
            | K::MaxItems { .. }
            | K::MinProperties { .. }
            | K::MaxProperties { .. } => out.push(plain(ViolationKind::BadLength)),
            K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
                out.push(plain(ViolationKind::PatternMismatch))
            }
            K::Format { .. } => out.push(plain(ViolationKind::BadFormat)),
            K::UniqueItems => out.push(plain(ViolationKind::DuplicateItems)),
            K::OneOfNotValid { context } | K::AnyOf { context } => {
                out.push(Violation {
                    expected: alternatives(&self.model, sub),
                    ..plain(ViolationKind::NoAlternativeMatched)
                });
                // Then why the closest alternative failed: the one that failed least, among
                // those whose discriminating constants and types fit.
                let wrong_branch = |errors: &Vec<jsonschema::ValidationError<'static>>| {
                    errors.iter().any(|e| {
                        matches!(e.kind(), K::Constant { .. } | K::Enum { .. })
                            || (matches!(e.kind(), K::Type { .. })
                                && e.instance_path() == error.instance_path())
                    })
                };
                let closest = context
                    .iter()
                    .min_by_key(|errors| (wrong_branch(errors), errors.len()));
                // When no alternative even has the right type or constants, the list of
                // alternatives is the lesson; otherwise also say why the nearest one failed.
                if let Some(errors) = closest.filter(|errors| !wrong_branch(errors)) {
                    for sub_error in errors {
                        self.push_violations(sub_error, out);
                    }
                }
            }
            K::OneOfMultipleValid { .. } => out.push(Violation {
                expected: alternatives(&self.model, sub),
                ..plain(ViolationKind::SeveralAlternativesMatched)
            }),
            _ => out.push(Violation {
                expected: error.to_string(),
                ..plain(ViolationKind::NotAllowed)
            }),
        }
    }
}

/// Refuses every attempt to fetch a schema: references are local by contract
/// ([`check_declared`]); this is the second lock.
struct RefuseRetrieval;

impl jsonschema::Retrieve for RefuseRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(
            format!("schemas are never fetched (`{uri}`): only local references are allowed")
                .into(),
        )
    }
}

/// Makes every optional property of a normalized schema accept `null` without changing the
/// schema's shape (so JSON Pointers into it still point at the model's schema).
fn accept_null_for_optionals(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (name, sub) in props.iter_mut() {
            accept_null_for_optionals(sub);
            if !required.contains(name) {
                accept_null(sub);
            }
        }
    }
    if let Some(items) = map.get_mut("items") {
        accept_null_for_optionals(items);
    }
}

fn accept_null(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push("null".into());
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    if let Some(constant) = map.remove("const") {
        map.insert("enum".into(), Value::Array(vec![constant, Value::Null]));
    }
}

/// Our path notation for a validator location: `filters.year`, `ids[2]`, `$` for the root.
fn instance_path(location: &jsonschema::paths::Location) -> String {
    let mut path = String::from("$");
    for segment in location.segments() {
        match segment {
            jsonschema::paths::LocationSegment::Property(name) => path = join(&path, &name),
            jsonschema::paths::LocationSegment::Index(i) => path = format!("{path}[{i}]"),
        }
    }
    path
}

/// Follows schema keyword segments from `root`, through local `$ref`s.
fn walk_schema<'a>(root: &'a Value, segments: &[String]) -> Option<&'a Value> {
    let mut cursor = root;
    for segment in segments {
        cursor = if segment == "$ref" {
            resolve_ref(root, cursor.get("$ref")?.as_str()?)?
        } else {
            match cursor {
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                other => other.get(segment)?,
            }
        };
    }
    Some(cursor)
}

fn join(path: &str, name: &str) -> String {
    if path == "$" {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
#[path = "violations_tests.rs"]
mod tests;
