//! A question an MCP server asks the person during one of our calls to it (its elicitation),
//! put to the person one line at a time: the form read from the server's schema, each field's
//! prompt, each typed line read into the field's value, and the conversation that ties them
//! together. The terminal approver runs it on the terminal
//! ([`crate::approvers::TerminalApprover`]); everything here is pure but [`Conversation`],
//! the one edge, so every rule is tested without a terminal.
//!
//! Guarantees:
//! - a form is shown only when every property is one the protocol allows: text (formats
//!   email, uri, date, date-time; length bounds), number or integer (bounds), boolean, one
//!   string choice (`enum`, `enumNames`, or `oneOf` of `{const, title}`), or a list of string
//!   choices (`items.enum` or `items.anyOf` of `{const, title}`, item bounds), and every default
//!   fits its field. Anything else (a nested object, a list of objects, an unknown format, a
//!   `required` that names no field) is refused as [`QuestionRefused::NotShown`] before
//!   anything is asked: the person is never shown half a form;
//! - every text that comes from the server (its words, field names, titles, descriptions,
//!   choices, defaults, the URL) reaches the person through
//!   [`toolgate_core::display::visible_line`]: no control or format character is written, and
//!   none of it can start a new line that would pass for ours;
//! - a value is sent only when it fits its field (a whole number for an integer, a listed
//!   choice, lengths, bounds, a basic format check) and only after the person saw all the
//!   answers and typed `y` to send them to the named server; an empty line keeps the default,
//!   leaves an optional field out, and is refused for a required one; a line holding a
//!   character that cannot be shown is refused (an arrow key's escape typed by mistake never
//!   reaches the server);
//! - a field answered badly [`TRIES`] times cancels the whole question; anything but `y` when
//!   asked whether to fill in the form, to send the answers or whether the URL was done
//!   declines, and `c` there cancels; end of input or an unreadable terminal is
//!   [`QuestionRefused::Unavailable`], never an answer given on the person's behalf.
//!
//! Written here rather than with a JSON Schema library: the protocol's form schema is a small
//! closed subset, and what matters is refusing everything outside it, which a general
//! validator would accept.

use serde_json::{Map, Number, Value};
use toolgate_core::display::{hidden, visible_line};
use toolgate_core::{Asked, QuestionAnswer, QuestionRefused, ServerQuestion};

/// How many times a field is asked before the whole question is cancelled.
pub const TRIES: usize = 3;

/// What the person is asked first, for a form.
pub const FORM_OPENING: &str = "Answer it? [y = fill in the form / n = decline / c = cancel] ";

/// What the person is asked about a URL.
pub const URL_QUESTION: &str = "Did you open it and finish there? [y = done / n = decline] ";

/// One field of a form, in the server's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property's name: the key the answer is sent under (the server's, untrusted).
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub kind: Kind,
    pub required: bool,
    /// The server's default, checked to fit the field.
    pub default: Option<Value>,
}

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Text {
        min_length: Option<u64>,
        max_length: Option<u64>,
        format: Option<TextFormat>,
    },
    Number {
        /// `integer`: a whole number.
        whole: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    YesNo,
    /// One of the choices.
    OneOf(Vec<Choice>),
    /// Some of the choices, each at most once.
    SomeOf {
        choices: Vec<Choice>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

/// The string formats the protocol allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Email,
    Uri,
    Date,
    DateTime,
}

/// A choice: the value sent, and the title shown when the server gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub value: String,
    pub title: Option<String>,
}

/// Why a form is not shown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormNotShown {
    #[error("the form's schema is not an object schema with `properties`")]
    NotAnObjectSchema,
    #[error("`required` is not a list of field names")]
    RequiredNotNames,
    #[error("`required` names `{0}`, which is not one of the form's fields")]
    RequiredUnknown(String),
    #[error("field `{field}`: {why}")]
    Field { field: String, why: FieldNotShown },
}

/// Why one field is not shown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldNotShown {
    #[error("its schema is not an object")]
    NotAnObject,
    #[error(
        "its type {0} is not one a form may ask (string, number, integer, boolean, or a list of choices); nested objects are not shown"
    )]
    UnsupportedType(String),
    #[error("a list's items are not string choices (`enum`, or `anyOf` of `{{const, title}}`)")]
    ItemsNotChoices,
    #[error("its choices are not strings (`enum`, or `oneOf` of `{{const, title}}`)")]
    ChoicesNotStrings,
    #[error("it offers no choices")]
    NoChoices,
    #[error("`{keyword}` is not {expected}")]
    BadKeyword {
        keyword: &'static str,
        expected: &'static str,
    },
    #[error("its format `{0}` is not email, uri, date or date-time")]
    UnknownFormat(String),
    #[error("its default does not fit it: {0}")]
    BadDefault(AnswerError),
}

/// Why a typed line (or a server's default) is not taken, saying what is expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("this field is required: type an answer")]
    Required,
    #[error(
        "the answer holds a character that cannot be shown ({0}): type it again without arrow or control keys"
    )]
    HiddenCharacter(String),
    #[error("the answer is longer than {limit} bytes, the most this terminal keeps")]
    TooLongToKeep { limit: usize },
    #[error("expected {0}")]
    WrongType(&'static str),
    #[error("expected y, yes, n or no")]
    NotYesNo,
    #[error("`{0}` is not a number: expected a number such as 3 or 2.5")]
    NotANumber(String),
    #[error("`{0}` is not a whole number: expected one without a fraction")]
    NotWhole(String),
    #[error("expected a number of at least {0}")]
    BelowMinimum(String),
    #[error("expected a number of at most {0}")]
    AboveMaximum(String),
    #[error("expected at least {0} characters")]
    TooShort(u64),
    #[error("expected at most {0} characters")]
    TooLong(u64),
    #[error("expected an email address: one @ with text on both sides")]
    NotEmail,
    #[error("expected a URI that starts with its scheme, such as https:")]
    NotUri,
    #[error("expected a date written YYYY-MM-DD")]
    NotDate,
    #[error("expected a date and time written YYYY-MM-DDTHH:MM:SS")]
    NotDateTime,
    #[error(
        "`{typed}` is not one of the choices: expected its number (1 to {count}), value or title"
    )]
    NotAChoice { typed: String, count: usize },
    #[error("`{0}` is the title of more than one choice: type its number instead")]
    AmbiguousTitle(String),
    #[error("`{0}` is chosen twice: name each choice once")]
    ChosenTwice(String),
    #[error("expected at least {0} choices, separated by commas")]
    TooFewChoices(u64),
    #[error("expected at most {0} choices")]
    TooManyChoices(u64),
}

/// The fields of a form's schema, in the server's order, or why the form is not shown.
pub fn form_fields(schema: &Value) -> Result<Vec<Field>, FormNotShown> {
    let object = schema.as_object().ok_or(FormNotShown::NotAnObjectSchema)?;
    if object.get("type").is_some_and(|t| t != "object") {
        return Err(FormNotShown::NotAnObjectSchema);
    }
    let empty = Map::new();
    let properties = match object.get("properties") {
        None => &empty,
        Some(p) => p.as_object().ok_or(FormNotShown::NotAnObjectSchema)?,
    };
    let required: Vec<&str> = match object.get("required") {
        None => Vec::new(),
        Some(r) => r
            .as_array()
            .ok_or(FormNotShown::RequiredNotNames)?
            .iter()
            .map(|n| n.as_str().ok_or(FormNotShown::RequiredNotNames))
            .collect::<Result<_, _>>()?,
    };
    if let Some(unknown) = required.iter().find(|n| !properties.contains_key(**n)) {
        return Err(FormNotShown::RequiredUnknown(
            visible_line(unknown).into_owned(),
        ));
    }
    properties
        .iter()
        .map(|(name, property)| {
            field(name, property, required.contains(&name.as_str())).map_err(|why| {
                FormNotShown::Field {
                    field: visible_line(name).into_owned(),
                    why,
                }
            })
        })
        .collect()
}

fn field(name: &str, property: &Value, required: bool) -> Result<Field, FieldNotShown> {
    let p = property.as_object().ok_or(FieldNotShown::NotAnObject)?;
    let text = |keyword: &'static str| -> Result<Option<String>, FieldNotShown> {
        match p.get(keyword) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(FieldNotShown::BadKeyword {
                keyword,
                expected: "a string",
            }),
        }
    };
    let count = |keyword: &'static str| -> Result<Option<u64>, FieldNotShown> {
        p.get(keyword)
            .map(|v| {
                v.as_u64().ok_or(FieldNotShown::BadKeyword {
                    keyword,
                    expected: "a count (a whole number of at least 0)",
                })
            })
            .transpose()
    };
    let bound = |keyword: &'static str| -> Result<Option<f64>, FieldNotShown> {
        p.get(keyword)
            .map(|v| {
                v.as_f64().ok_or(FieldNotShown::BadKeyword {
                    keyword,
                    expected: "a number",
                })
            })
            .transpose()
    };
    let kind = match p.get("type") {
        Some(Value::String(t)) if t == "string" => {
            if p.contains_key("enum") || p.contains_key("oneOf") {
                Kind::OneOf(choices(p, "oneOf").map_err(|why| match why {
                    FieldNotShown::ItemsNotChoices => FieldNotShown::ChoicesNotStrings,
                    other => other,
                })?)
            } else {
                let format = match text("format")?.as_deref() {
                    None => None,
                    Some("email") => Some(TextFormat::Email),
                    Some("uri") => Some(TextFormat::Uri),
                    Some("date") => Some(TextFormat::Date),
                    Some("date-time") => Some(TextFormat::DateTime),
                    Some(other) => {
                        return Err(FieldNotShown::UnknownFormat(
                            visible_line(other).into_owned(),
                        ));
                    }
                };
                Kind::Text {
                    min_length: count("minLength")?,
                    max_length: count("maxLength")?,
                    format,
                }
            }
        }
        Some(Value::String(t)) if t == "number" || t == "integer" => Kind::Number {
            whole: t == "integer",
            minimum: bound("minimum")?,
            maximum: bound("maximum")?,
        },
        Some(Value::String(t)) if t == "boolean" => Kind::YesNo,
        Some(Value::String(t)) if t == "array" => {
            let items = p
                .get("items")
                .and_then(Value::as_object)
                .ok_or(FieldNotShown::ItemsNotChoices)?;
            if items.get("type").is_some_and(|t| t != "string") {
                return Err(FieldNotShown::ItemsNotChoices);
            }
            Kind::SomeOf {
                choices: choices(items, "anyOf")?,
                min_items: count("minItems")?,
                max_items: count("maxItems")?,
            }
        }
        other => {
            let shown = other.map_or_else(|| "(none)".to_string(), Value::to_string);
            return Err(FieldNotShown::UnsupportedType(
                visible_line(&shown).into_owned(),
            ));
        }
    };
    let field = Field {
        name: name.to_string(),
        title: text("title")?,
        description: text("description")?,
        kind,
        required,
        default: p.get("default").cloned(),
    };
    if let Some(default) = &field.default {
        fits(&field.kind, default).map_err(FieldNotShown::BadDefault)?;
    }
    Ok(field)
}

/// The string choices of `schema`: its `enum` (titled by `enumNames` when given), or its
/// `titled` list (`oneOf` for one choice, `anyOf` for a list's items) of `{const, title}`.
fn choices(schema: &Map<String, Value>, titled: &str) -> Result<Vec<Choice>, FieldNotShown> {
    let list = match (schema.get("enum"), schema.get(titled)) {
        (Some(Value::Array(values)), None) => {
            let titles = match schema.get("enumNames") {
                None => None,
                Some(Value::Array(t)) if t.len() == values.len() => Some(t),
                Some(_) => return Err(FieldNotShown::ItemsNotChoices),
            };
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let title = match titles.map(|t| &t[i]) {
                        None => None,
                        Some(Value::String(t)) => Some(t.clone()),
                        Some(_) => return Err(FieldNotShown::ItemsNotChoices),
                    };
                    match v {
                        Value::String(value) => Ok(Choice {
                            value: value.clone(),
                            title,
                        }),
                        _ => Err(FieldNotShown::ItemsNotChoices),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        (None, Some(Value::Array(options))) => options
            .iter()
            .map(|o| match (o.get("const"), o.get("title")) {
                (Some(Value::String(value)), None) => Ok(Choice {
                    value: value.clone(),
                    title: None,
                }),
                (Some(Value::String(value)), Some(Value::String(title))) => Ok(Choice {
                    value: value.clone(),
                    title: Some(title.clone()),
                }),
                _ => Err(FieldNotShown::ItemsNotChoices),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(FieldNotShown::ItemsNotChoices),
    };
    if list.is_empty() {
        return Err(FieldNotShown::NoChoices);
    }
    Ok(list)
}

/// A number as a person writes it (`3`, not `3.0`).
fn number_text(n: f64) -> String {
    format!("{n}")
}

/// A value of the server's (a default, a chosen value) as shown on one line.
pub fn shown_value(value: &Value) -> String {
    match value {
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        // Not JSON's escapes (`\u001b`): the same names as every other shown text.
        Value::String(s) => format!("\"{}\"", visible_line(s)),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(shown_value).collect::<Vec<_>>().join(", ")
        ),
        other => visible_line(&other.to_string()).into_owned(),
    }
}

/// A choice as listed: its title and, when that differs, its value.
fn shown_choice(choice: &Choice) -> String {
    let value = visible_line(&choice.value);
    match &choice.title {
        Some(title) if *title != choice.value => format!("{} ({value})", visible_line(title)),
        _ => value.into_owned(),
    }
}

/// What a field expects, in a few words.
pub fn expects(field: &Field) -> String {
    let mut said = match &field.kind {
        Kind::Text {
            min_length,
            max_length,
            format,
        } => {
            let mut s = match format {
                None => "text".to_string(),
                Some(TextFormat::Email) => "an email address".to_string(),
                Some(TextFormat::Uri) => "a URI (such as https://...)".to_string(),
                Some(TextFormat::Date) => "a date (YYYY-MM-DD)".to_string(),
                Some(TextFormat::DateTime) => "a date and time (YYYY-MM-DDTHH:MM:SS)".to_string(),
            };
            match (min_length, max_length) {
                (Some(min), Some(max)) => s.push_str(&format!(" of {min} to {max} characters")),
                (Some(min), None) => s.push_str(&format!(" of at least {min} characters")),
                (None, Some(max)) => s.push_str(&format!(" of at most {max} characters")),
                (None, None) => {}
            }
            s
        }
        Kind::Number {
            whole,
            minimum,
            maximum,
        } => {
            let mut s = if *whole { "a whole number" } else { "a number" }.to_string();
            match (minimum, maximum) {
                (Some(min), Some(max)) => s.push_str(&format!(
                    " from {} to {}",
                    number_text(*min),
                    number_text(*max)
                )),
                (Some(min), None) => s.push_str(&format!(" of at least {}", number_text(*min))),
                (None, Some(max)) => s.push_str(&format!(" of at most {}", number_text(*max))),
                (None, None) => {}
            }
            s
        }
        Kind::YesNo => "y or n".to_string(),
        Kind::OneOf(_) => "one choice: its number, value or title".to_string(),
        Kind::SomeOf {
            min_items,
            max_items,
            ..
        } => {
            let mut s = "choices separated by commas: numbers, values or titles".to_string();
            if let Some(min) = min_items {
                s.push_str(&format!("; at least {min}"));
            }
            if let Some(max) = max_items {
                s.push_str(&format!("; at most {max}"));
            }
            s
        }
    };
    said.push_str(&match (&field.default, field.required) {
        (Some(default), _) => format!("; Enter keeps {}", shown_value(default)),
        (None, false) => "; Enter leaves it out".to_string(),
        (None, true) => "; required".to_string(),
    });
    said
}

/// What the person reads before answering field `position` of `total`: its title and name,
/// description, choices and what it expects, ending with `> `.
pub fn field_prompt(field: &Field, position: usize, total: usize) -> String {
    let name = visible_line(&field.name);
    let mut prompt = match &field.title {
        Some(title) => format!("({position}/{total}) {} [{name}]", visible_line(title)),
        None => format!("({position}/{total}) {name}"),
    };
    if field.required {
        prompt.push_str(" (required)");
    }
    if let Some(description) = &field.description {
        prompt.push_str(&format!("\n    {}", visible_line(description)));
    }
    if let Kind::OneOf(choices) | Kind::SomeOf { choices, .. } = &field.kind {
        for (i, choice) in choices.iter().enumerate() {
            prompt.push_str(&format!("\n    {}. {}", i + 1, shown_choice(choice)));
        }
    }
    prompt.push_str(&format!("\n    Type {}\n> ", expects(field)));
    prompt
}

/// The value one typed line gives `field`: `Ok(None)` leaves an optional field out.
pub fn parse_answer(field: &Field, line: &str) -> Result<Option<Value>, AnswerError> {
    let typed = line.trim();
    if let Some(c) = typed.chars().find(|c| hidden(*c)) {
        return Err(AnswerError::HiddenCharacter(
            visible_line(&c.to_string()).into_owned(),
        ));
    }
    if typed.is_empty() {
        return match (&field.default, field.required) {
            (Some(default), _) => Ok(Some(default.clone())),
            (None, false) => Ok(None),
            (None, true) => Err(AnswerError::Required),
        };
    }
    let value = match &field.kind {
        Kind::Text { .. } => Value::String(typed.to_string()),
        Kind::Number { whole, .. } => number(typed, *whole)?,
        Kind::YesNo => match typed.to_ascii_lowercase().as_str() {
            "y" | "yes" => Value::Bool(true),
            "n" | "no" => Value::Bool(false),
            _ => return Err(AnswerError::NotYesNo),
        },
        Kind::OneOf(choices) => Value::String(choose(choices, typed)?),
        Kind::SomeOf { choices, .. } => Value::Array(
            typed
                .split(',')
                .map(str::trim)
                .filter(|piece| !piece.is_empty())
                .map(|piece| choose(choices, piece).map(Value::String))
                .collect::<Result<_, _>>()?,
        ),
    };
    fits(&field.kind, &value)?;
    Ok(Some(value))
}

fn number(typed: &str, whole: bool) -> Result<Value, AnswerError> {
    if let Ok(n) = typed.parse::<i64>() {
        return Ok(Value::from(n));
    }
    let n = typed
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .ok_or_else(|| AnswerError::NotANumber(visible_line(typed).into_owned()))?;
    if whole {
        // `3.0` is whole; `2.5` and numbers beyond an i64 are not taken as integers.
        return if n.fract() == 0.0 && n.abs() < 9.0e15 {
            Ok(Value::from(n as i64))
        } else {
            Err(AnswerError::NotWhole(visible_line(typed).into_owned()))
        };
    }
    Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| AnswerError::NotANumber(visible_line(typed).into_owned()))
}

/// The value of the choice `typed` names: its value, its number, or its shown title
/// (case aside, when only one choice has it).
fn choose(choices: &[Choice], typed: &str) -> Result<String, AnswerError> {
    if let Some(c) = choices
        .iter()
        .find(|c| c.value == typed || visible_line(&c.value) == typed)
    {
        return Ok(c.value.clone());
    }
    if let Some(c) = typed
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| choices.get(i))
    {
        return Ok(c.value.clone());
    }
    let wanted = typed.to_lowercase();
    let titled: Vec<&Choice> = choices
        .iter()
        .filter(|c| {
            c.title
                .as_deref()
                .is_some_and(|t| visible_line(t).to_lowercase() == wanted)
        })
        .collect();
    match titled.as_slice() {
        [one] => Ok(one.value.clone()),
        [] => Err(AnswerError::NotAChoice {
            typed: visible_line(typed).into_owned(),
            count: choices.len(),
        }),
        _ => Err(AnswerError::AmbiguousTitle(
            visible_line(typed).into_owned(),
        )),
    }
}

/// Whether `value` fits a field of `kind` (a typed answer once read, or a server's default).
pub fn fits(kind: &Kind, value: &Value) -> Result<(), AnswerError> {
    match kind {
        Kind::Text {
            min_length,
            max_length,
            format,
        } => {
            let text = value.as_str().ok_or(AnswerError::WrongType("text"))?;
            let length = text.chars().count() as u64;
            if let Some(min) = min_length.filter(|min| length < *min) {
                return Err(AnswerError::TooShort(min));
            }
            if let Some(max) = max_length.filter(|max| length > *max) {
                return Err(AnswerError::TooLong(max));
            }
            match format {
                None => Ok(()),
                Some(TextFormat::Email) => {
                    is_email(text).then_some(()).ok_or(AnswerError::NotEmail)
                }
                Some(TextFormat::Uri) => is_uri(text).then_some(()).ok_or(AnswerError::NotUri),
                Some(TextFormat::Date) => is_date(text).then_some(()).ok_or(AnswerError::NotDate),
                Some(TextFormat::DateTime) => is_date_time(text)
                    .then_some(())
                    .ok_or(AnswerError::NotDateTime),
            }
        }
        Kind::Number {
            whole,
            minimum,
            maximum,
        } => {
            let n = value.as_f64().ok_or(AnswerError::WrongType("a number"))?;
            if *whole && !(value.is_i64() || value.is_u64()) {
                return Err(AnswerError::NotWhole(value.to_string()));
            }
            if let Some(min) = minimum.filter(|min| n < *min) {
                return Err(AnswerError::BelowMinimum(number_text(min)));
            }
            if let Some(max) = maximum.filter(|max| n > *max) {
                return Err(AnswerError::AboveMaximum(number_text(max)));
            }
            Ok(())
        }
        Kind::YesNo => value
            .is_boolean()
            .then_some(())
            .ok_or(AnswerError::WrongType("yes or no")),
        Kind::OneOf(choices) => {
            let chosen = value.as_str().ok_or(AnswerError::WrongType("a choice"))?;
            is_choice(choices, chosen)
        }
        Kind::SomeOf {
            choices,
            min_items,
            max_items,
        } => {
            let chosen = value
                .as_array()
                .ok_or(AnswerError::WrongType("a list of choices"))?;
            let mut seen: Vec<&str> = Vec::new();
            for item in chosen {
                let item = item.as_str().ok_or(AnswerError::WrongType("a choice"))?;
                is_choice(choices, item)?;
                if seen.contains(&item) {
                    return Err(AnswerError::ChosenTwice(visible_line(item).into_owned()));
                }
                seen.push(item);
            }
            let count = seen.len() as u64;
            if let Some(min) = min_items.filter(|min| count < *min) {
                return Err(AnswerError::TooFewChoices(min));
            }
            if let Some(max) = max_items.filter(|max| count > *max) {
                return Err(AnswerError::TooManyChoices(max));
            }
            Ok(())
        }
    }
}

fn is_choice(choices: &[Choice], value: &str) -> Result<(), AnswerError> {
    if choices.iter().any(|c| c.value == value) {
        Ok(())
    } else {
        Err(AnswerError::NotAChoice {
            typed: visible_line(value).into_owned(),
            count: choices.len(),
        })
    }
}

fn is_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn is_uri(text: &str) -> bool {
    match text.split_once(':') {
        Some((scheme, rest)) => {
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !rest.is_empty()
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) {
        return false;
    }
    if !digits(5..7) || !digits(8..10) {
        return false;
    }
    let two = |at: usize| u32::from(b[at] - b'0') * 10 + u32::from(b[at + 1] - b'0');
    (1..=12).contains(&two(5)) && (1..=31).contains(&two(8))
}

fn is_date_time(text: &str) -> bool {
    match (text.get(..10), text.get(10..11), text.get(11..)) {
        (Some(date), Some("T" | "t"), Some(time)) => {
            is_date(date) && time.len() >= 8 && time.as_bytes()[2] == b':'
        }
        _ => false,
    }
}

/// The answers as the person checks them before sending: each field, and what it will send
/// or that it is left out.
pub fn answers_summary(fields: &[Field], answers: &Map<String, Value>) -> String {
    let mut summary = String::from("Your answers:");
    for field in fields {
        let label = match &field.title {
            Some(title) => format!("{} [{}]", visible_line(title), visible_line(&field.name)),
            None => visible_line(&field.name).into_owned(),
        };
        let said = answers
            .get(&field.name)
            .map_or_else(|| "(left out)".to_string(), shown_value);
        summary.push_str(&format!("\n    {label}: {said}"));
    }
    summary
}

/// A line as the person's side of the conversation gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    Line(String),
    /// Longer than the channel keeps: not taken, rather than cut short.
    TooLong {
        limit: usize,
    },
}

/// Where the person is asked: the one edge of this module.
pub trait Conversation {
    /// Shows `prompt` and reads one line typed after it.
    fn ask(&mut self, prompt: &str) -> Result<Typed, QuestionRefused>;
    /// Shows `text` without waiting for an answer.
    fn tell(&mut self, text: &str) -> Result<(), QuestionRefused>;
}

/// A server's question ready to be asked: the form read, or the URL.
#[derive(Debug, Clone)]
pub struct Interview {
    question: ServerQuestion,
    fields: Vec<Field>,
}

impl Interview {
    /// Reads the question, refusing a form that cannot be shown whole (before anything is
    /// asked).
    pub fn of(question: &ServerQuestion) -> Result<Self, QuestionRefused> {
        let fields = match &question.asked {
            Asked::Form { schema } => form_fields(schema).map_err(|why| {
                QuestionRefused::NotShown(format!("a form it cannot show: {why}"))
            })?,
            Asked::Url { .. } => Vec::new(),
        };
        Ok(Interview {
            question: question.clone(),
            fields,
        })
    }

    /// Asks the person through `conversation`. See the module documentation.
    pub fn run(
        &self,
        conversation: &mut dyn Conversation,
    ) -> Result<QuestionAnswer, QuestionRefused> {
        let described = self.question.describe();
        match &self.question.asked {
            Asked::Url { url } => {
                let prompt = format!("{described}\nURL: {}\n{URL_QUESTION}", visible_line(url));
                match conversation.ask(&prompt)? {
                    Typed::Line(line) if crate::approvers::is_yes(&line) => {
                        Ok(QuestionAnswer::Accept(Map::new()))
                    }
                    _ => Ok(QuestionAnswer::Decline),
                }
            }
            Asked::Form { .. } => {
                match conversation.ask(&format!("{described}\n{FORM_OPENING}"))? {
                    Typed::Line(line) if crate::approvers::is_yes(&line) => {}
                    Typed::Line(line)
                        if matches!(line.trim().to_ascii_lowercase().as_str(), "c" | "cancel") =>
                    {
                        return Ok(QuestionAnswer::Cancel);
                    }
                    _ => return Ok(QuestionAnswer::Decline),
                }
                let mut answers = Map::new();
                for (i, field) in self.fields.iter().enumerate() {
                    match self.ask_field(conversation, field, i + 1)? {
                        FieldOutcome::Value(v) => {
                            answers.insert(field.name.clone(), v);
                        }
                        FieldOutcome::LeftOut => {}
                        FieldOutcome::GaveUp => return Ok(QuestionAnswer::Cancel),
                    }
                }
                let confirm = format!(
                    "{}\nSend these answers to `{}`? [y/N] ",
                    answers_summary(&self.fields, &answers),
                    self.question.server
                );
                match conversation.ask(&confirm)? {
                    Typed::Line(line) if crate::approvers::is_yes(&line) => {
                        Ok(QuestionAnswer::Accept(answers))
                    }
                    _ => Ok(QuestionAnswer::Decline),
                }
            }
        }
    }

    fn ask_field(
        &self,
        conversation: &mut dyn Conversation,
        field: &Field,
        position: usize,
    ) -> Result<FieldOutcome, QuestionRefused> {
        let prompt = field_prompt(field, position, self.fields.len());
        let mut refused = String::new();
        for attempt in 1..=TRIES {
            let shown = if refused.is_empty() {
                prompt.clone()
            } else {
                format!("{refused}\n{prompt}")
            };
            let read = match conversation.ask(&shown)? {
                Typed::Line(line) => parse_answer(field, &line),
                Typed::TooLong { limit } => Err(AnswerError::TooLongToKeep { limit }),
            };
            match read {
                Ok(Some(value)) => return Ok(FieldOutcome::Value(value)),
                Ok(None) => return Ok(FieldOutcome::LeftOut),
                Err(why) => refused = format!("Not taken (try {attempt} of {TRIES}): {why}."),
            }
        }
        conversation.tell(&format!(
            "{refused}\nNo answer was taken in {TRIES} tries: the whole question is cancelled."
        ))?;
        Ok(FieldOutcome::GaveUp)
    }
}

/// How asking one field ended.
enum FieldOutcome {
    Value(Value),
    LeftOut,
    GaveUp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::VecDeque;

    fn only_field(property: Value, required: bool) -> Field {
        let schema = json!({
            "type": "object",
            "properties": {"f": property},
            "required": if required { json!(["f"]) } else { json!([]) },
        });
        let mut fields = form_fields(&schema).unwrap();
        assert_eq!(fields.len(), 1);
        fields.remove(0)
    }

    fn colors() -> Value {
        json!({"type": "string", "oneOf": [
            {"const": "r", "title": "Red"},
            {"const": "g", "title": "Green"},
            {"const": "b", "title": "Blue"},
        ]})
    }

    /// Each `(line, outcome)` read into `field`: `Ok(value)` (`Null`: left out) or the error.
    fn check(field: &Field, cases: &[(&str, Result<Value, AnswerError>)]) {
        for (line, expected) in cases {
            let got = parse_answer(field, line).map(|v| v.unwrap_or(Value::Null));
            assert_eq!(&got, expected, "{line:?} for {field:?}");
        }
    }

    #[test]
    fn fields_keep_the_servers_order_and_what_each_asks() {
        let schema = json!({
            "type": "object",
            "properties": {
                "zeta": {"type": "string", "title": "Z", "description": "last letter",
                         "minLength": 1, "maxLength": 5, "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "ok": {"type": "boolean", "default": true},
                "color": colors(),
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                         "minItems": 1, "maxItems": 2},
                "moods": {"type": "array", "items": {"anyOf": [{"const": "up", "title": "Up"}]}},
            },
            "required": ["age", "zeta"],
        });
        let fields = form_fields(&schema).unwrap();
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["zeta", "age", "ok", "color", "size", "tags", "moods"]
        );
        assert_eq!(
            fields[0],
            Field {
                name: "zeta".into(),
                title: Some("Z".into()),
                description: Some("last letter".into()),
                kind: Kind::Text {
                    min_length: Some(1),
                    max_length: Some(5),
                    format: Some(TextFormat::Email)
                },
                required: true,
                default: None,
            }
        );
        let kinds: Vec<&Kind> = fields.iter().map(|f| &f.kind).collect();
        assert_eq!(
            kinds[1],
            &Kind::Number {
                whole: true,
                minimum: Some(0.0),
                maximum: Some(150.0)
            }
        );
        assert_eq!(kinds[2], &Kind::YesNo);
        assert_eq!(fields[2].default, Some(json!(true)));
        assert!(!fields[2].required);
        let choice = |v: &str, t: &str| Choice {
            value: v.into(),
            title: Some(t.into()),
        };
        assert_eq!(
            kinds[4],
            &Kind::OneOf(vec![choice("s", "Small"), choice("m", "Medium")])
        );
        assert!(matches!(
            kinds[5],
            Kind::SomeOf {
                min_items: Some(1),
                max_items: Some(2),
                ..
            }
        ));
        assert_eq!(
            kinds[6],
            &Kind::SomeOf {
                choices: vec![choice("up", "Up")],
                min_items: None,
                max_items: None
            }
        );
    }

    #[test]
    fn a_nested_object_form_is_refused_before_asking() {
        let form = |property: Value| json!({"type": "object", "properties": {"f": property}});
        for (schema, why) in [
            (
                form(json!({"type": "object", "properties": {"x": {"type": "string"}}})),
                "nested objects",
            ),
            (
                form(json!({"type": "array", "items": {"type": "object"}})),
                "not string choices",
            ),
            (
                form(json!({"type": "array", "items": {"type": "string"}})),
                "not string choices",
            ),
            (
                form(json!({"type": "array", "items": {"type": "number", "enum": [1, 2]}})),
                "not string choices",
            ),
            (
                form(json!({"type": "string", "enum": [1, 2]})),
                "not strings",
            ),
            (
                form(json!({"type": "string", "enum": []})),
                "offers no choices",
            ),
            (form(json!({"type": ["string", "null"]})), "nested objects"),
            (form(json!({"enum": ["a"]})), "(none)"),
            (form(json!("string")), "not an object"),
            (
                form(json!({"type": "string", "format": "uuid"})),
                "format `uuid`",
            ),
            (
                form(json!({"type": "string", "maxLength": -1})),
                "`maxLength` is not a count",
            ),
            (
                form(json!({"type": "integer", "default": 2.5})),
                "default does not fit",
            ),
            (
                form(json!({"type": "string", "enum": ["a"], "default": "z"})),
                "default does not fit",
            ),
            (
                json!({"type": "object", "properties": {}, "required": ["ghost"]}),
                "`ghost`",
            ),
            (json!({"type": "array"}), "not an object schema"),
            (json!([]), "not an object schema"),
        ] {
            let question = ServerQuestion {
                server: "files".into(),
                message: "fill this in".into(),
                asked: Asked::Form {
                    schema: schema.clone(),
                },
            };
            match Interview::of(&question) {
                Err(QuestionRefused::NotShown(said)) => {
                    assert!(said.contains(why), "{schema}: {said}")
                }
                other => panic!("{schema} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn a_required_field_left_empty_is_refused_and_an_optional_one_left_out() {
        check(
            &only_field(json!({"type": "string"}), true),
            &[
                ("", Err(AnswerError::Required)),
                ("  ", Err(AnswerError::Required)),
                (" Ann ", Ok(json!("Ann"))),
            ],
        );
        check(
            &only_field(json!({"type": "string"}), false),
            &[("", Ok(Value::Null))],
        );
        check(
            &only_field(json!({"type": "integer", "default": 7}), true),
            &[("", Ok(json!(7))), ("8", Ok(json!(8)))],
        );
    }

    #[test]
    fn an_integer_field_refuses_a_fraction() {
        let field = only_field(
            json!({"type": "integer", "minimum": -5, "maximum": 100}),
            true,
        );
        check(
            &field,
            &[
                ("2.5", Err(AnswerError::NotWhole("2.5".into()))),
                ("1e40", Err(AnswerError::NotWhole("1e40".into()))),
                ("3.0", Ok(json!(3))),
                ("-5", Ok(json!(-5))),
                ("100", Ok(json!(100))),
                ("101", Err(AnswerError::AboveMaximum("100".into()))),
                ("-6", Err(AnswerError::BelowMinimum("-5".into()))),
                ("ten", Err(AnswerError::NotANumber("ten".into()))),
                ("NaN", Err(AnswerError::NotANumber("NaN".into()))),
            ],
        );
    }

    #[test]
    fn a_number_outside_its_range_is_refused() {
        let field = only_field(
            json!({"type": "number", "minimum": 0.5, "maximum": 2}),
            true,
        );
        check(
            &field,
            &[
                ("0.5", Ok(json!(0.5))),
                ("1.25", Ok(json!(1.25))),
                ("2", Ok(json!(2))),
                ("0.4", Err(AnswerError::BelowMinimum("0.5".into()))),
                ("2.01", Err(AnswerError::AboveMaximum("2".into()))),
                ("inf", Err(AnswerError::NotANumber("inf".into()))),
            ],
        );
    }

    #[test]
    fn a_yes_no_field_takes_only_yes_or_no() {
        check(
            &only_field(json!({"type": "boolean"}), true),
            &[
                ("y", Ok(json!(true))),
                ("YES", Ok(json!(true))),
                ("n", Ok(json!(false))),
                ("No", Ok(json!(false))),
                ("true", Err(AnswerError::NotYesNo)),
                ("yeah", Err(AnswerError::NotYesNo)),
            ],
        );
    }

    #[test]
    fn an_enum_answer_outside_the_choices_is_refused() {
        let not = |typed: &str| {
            Err(AnswerError::NotAChoice {
                typed: typed.into(),
                count: 3,
            })
        };
        check(
            &only_field(colors(), true),
            &[
                ("g", Ok(json!("g"))),
                ("Green", Ok(json!("g"))),
                ("blue", Ok(json!("b"))),
                ("1", Ok(json!("r"))),
                ("3", Ok(json!("b"))),
                ("0", not("0")),
                ("4", not("4")),
                ("purple", not("purple")),
                ("G", not("G")),
            ],
        );
        let twins = only_field(
            json!({"type": "string", "oneOf": [{"const": "a", "title": "Same"}, {"const": "b", "title": "same"}]}),
            true,
        );
        check(
            &twins,
            &[
                ("same", Err(AnswerError::AmbiguousTitle("same".into()))),
                ("2", Ok(json!("b"))),
            ],
        );
    }

    #[test]
    fn a_list_of_choices_keeps_its_item_bounds_and_refuses_repeats() {
        let field = only_field(
            json!({"type": "array", "minItems": 1, "maxItems": 2,
                   "items": {"anyOf": [{"const": "a", "title": "Apple"}, {"const": "b", "title": "Pear"}, {"const": "c"}]}}),
            false,
        );
        check(
            &field,
            &[
                ("a, Pear", Ok(json!(["a", "b"]))),
                ("3", Ok(json!(["c"]))),
                ("", Ok(Value::Null)),
                (" , ", Err(AnswerError::TooFewChoices(1))),
                ("a,b,c", Err(AnswerError::TooManyChoices(2))),
                ("a, apple", Err(AnswerError::ChosenTwice("a".into()))),
                (
                    "a, kiwi",
                    Err(AnswerError::NotAChoice {
                        typed: "kiwi".into(),
                        count: 3,
                    }),
                ),
            ],
        );
    }

    #[test]
    fn a_text_field_checks_its_length_and_format() {
        let text = |extra: Value| {
            let mut p = json!({"type": "string"});
            p.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            only_field(p, true)
        };
        check(
            &text(json!({"minLength": 2, "maxLength": 3})),
            &[
                ("ab", Ok(json!("ab"))),
                ("été", Ok(json!("été"))),
                ("a", Err(AnswerError::TooShort(2))),
                ("abcd", Err(AnswerError::TooLong(3))),
            ],
        );
        check(
            &text(json!({"format": "email"})),
            &[
                ("ann@example.org", Ok(json!("ann@example.org"))),
                ("ann", Err(AnswerError::NotEmail)),
                ("@example.org", Err(AnswerError::NotEmail)),
                ("ann@", Err(AnswerError::NotEmail)),
                ("a@b@c", Err(AnswerError::NotEmail)),
                ("an n@x", Err(AnswerError::NotEmail)),
            ],
        );
        check(
            &text(json!({"format": "uri"})),
            &[
                ("https://example.org/x", Ok(json!("https://example.org/x"))),
                (
                    "mailto:ann@example.org",
                    Ok(json!("mailto:ann@example.org")),
                ),
                ("example.org", Err(AnswerError::NotUri)),
                ("://x", Err(AnswerError::NotUri)),
                ("1http://x", Err(AnswerError::NotUri)),
            ],
        );
        check(
            &text(json!({"format": "date"})),
            &[
                ("2026-12-05", Ok(json!("2026-12-05"))),
                ("2026-13-05", Err(AnswerError::NotDate)),
                ("2026-1-05", Err(AnswerError::NotDate)),
                ("05/12/2026", Err(AnswerError::NotDate)),
                ("２０26-12-05", Err(AnswerError::NotDate)),
            ],
        );
        check(
            &text(json!({"format": "date-time"})),
            &[
                ("2026-12-05T12:00:00Z", Ok(json!("2026-12-05T12:00:00Z"))),
                ("2026-12-05 12:00", Err(AnswerError::NotDateTime)),
            ],
        );
    }

    #[test]
    fn a_control_character_typed_into_an_answer_is_refused() {
        let field = only_field(json!({"type": "string"}), true);
        check(
            &field,
            &[
                (
                    "Ann\u{1b}[D",
                    Err(AnswerError::HiddenCharacter("<ESC>".into())),
                ),
                (
                    "A\u{202e}nn",
                    Err(AnswerError::HiddenCharacter("<U+202E>".into())),
                ),
                ("Ann\r", Ok(json!("Ann"))),
            ],
        );
    }

    #[test]
    fn an_escape_sequence_in_a_field_title_is_shown_not_run() {
        let hostile = "\u{1b}[2K\u{1b}[1A\u{202e}ok\n(2/2) toolgate: approved\u{200b}";
        let fields = [
            json!({"type": "string", "title": hostile}),
            json!({"type": "string", "description": hostile}),
            json!({"type": "string", "default": hostile}),
            json!({"type": "string", "oneOf": [{"const": "a", "title": hostile}]}),
            json!({"type": "string", "enum": [hostile]}),
            json!({"type": "array", "items": {"anyOf": [{"const": hostile, "title": hostile}]}}),
        ];
        for property in fields {
            let field = only_field(property.clone(), false);
            let mut answers = Map::new();
            if let Some(default) = &field.default {
                answers.insert(field.name.clone(), default.clone());
            }
            let prompt = field_prompt(&field, 1, 1);
            assert!(prompt.contains("<ESC>[2K"), "{property}: {prompt:?}");
            for shown in [
                prompt,
                answers_summary(std::slice::from_ref(&field), &answers),
            ] {
                assert!(
                    !shown.chars().any(|c| hidden(c) && c != '\n'),
                    "{property}: {shown:?}"
                );
                assert!(
                    !shown.lines().any(|l| l.starts_with("(2/2)")),
                    "a server's text began a line of its own: {shown:?}"
                );
            }
        }
        let named = json!({"type": "object", "properties": {hostile: {"type": "boolean"}}});
        let field = form_fields(&named).unwrap().remove(0);
        let prompt = field_prompt(&field, 1, 1);
        assert!(
            !prompt.chars().any(|c| hidden(c) && c != '\n'),
            "{prompt:?}"
        );
        assert!(prompt.ends_with("\n> "), "{prompt:?}");
    }

    /// The person's side of a conversation: the lines they type, in order, and everything
    /// they were shown; when the lines run out, input has ended.
    struct Script {
        typed: VecDeque<Typed>,
        shown: Vec<String>,
    }

    impl Script {
        fn typing(lines: &[&str]) -> Self {
            Script {
                typed: lines.iter().map(|l| Typed::Line(l.to_string())).collect(),
                shown: Vec::new(),
            }
        }
    }

    impl Conversation for Script {
        fn ask(&mut self, prompt: &str) -> Result<Typed, QuestionRefused> {
            self.shown.push(prompt.to_string());
            self.typed
                .pop_front()
                .ok_or_else(|| QuestionRefused::Unavailable("end of input".into()))
        }

        fn tell(&mut self, text: &str) -> Result<(), QuestionRefused> {
            self.shown.push(text.to_string());
            Ok(())
        }
    }

    fn form_question() -> ServerQuestion {
        ServerQuestion {
            server: "crm".into(),
            message: "Who should we contact?".into(),
            asked: Asked::Form {
                schema: json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "title": "Name"},
                        "age": {"type": "integer", "minimum": 0},
                        "news": {"type": "boolean", "default": false},
                    },
                    "required": ["name"],
                }),
            },
        }
    }

    fn run(
        question: &ServerQuestion,
        lines: &[&str],
    ) -> (Result<QuestionAnswer, QuestionRefused>, Vec<String>) {
        let mut script = Script::typing(lines);
        let answer = Interview::of(question).and_then(|i| i.run(&mut script));
        (answer, script.shown)
    }

    fn accepted(value: Value) -> Result<QuestionAnswer, QuestionRefused> {
        Ok(QuestionAnswer::Accept(value.as_object().unwrap().clone()))
    }

    #[test]
    fn a_required_field_left_empty_is_asked_again() {
        let (answer, shown) = run(&form_question(), &["y", "", "Ann", "", "", "y"]);
        assert_eq!(answer, accepted(json!({"name": "Ann", "news": false})));
        assert!(
            shown[0].starts_with(&form_question().describe()),
            "{shown:?}"
        );
        assert!(shown[0].ends_with(FORM_OPENING));
        assert!(
            shown[2].starts_with("Not taken (try 1 of 3): this field is required"),
            "{}",
            shown[2]
        );
        assert!(
            shown[2].ends_with(&shown[1]),
            "the field is asked again whole"
        );
        let summary = shown.last().unwrap();
        assert!(
            summary.contains("Name [name]: \"Ann\"\n    age: (left out)\n    news: no"),
            "{summary}"
        );
        assert!(
            summary.ends_with("Send these answers to `crm`? [y/N] "),
            "{summary}"
        );
    }

    #[test]
    fn three_bad_answers_cancel_the_whole_question() {
        let (answer, shown) = run(&form_question(), &["y", "Ann", "x", "-1", "2.5", "y"]);
        assert_eq!(answer, Ok(QuestionAnswer::Cancel));
        let last = shown.last().unwrap();
        assert!(last.contains("try 3 of 3"), "{last}");
        assert!(last.ends_with("the whole question is cancelled."), "{last}");
        assert!(
            !shown.iter().any(|s| s.contains("Send these answers")),
            "{shown:?}"
        );
    }

    #[test]
    fn only_an_explicit_yes_sends_the_answers() {
        for (confirm, expected) in [
            (
                "y",
                accepted(json!({"name": "Ann", "age": 30, "news": true})),
            ),
            (
                "yes",
                accepted(json!({"name": "Ann", "age": 30, "news": true})),
            ),
            ("", Ok(QuestionAnswer::Decline)),
            ("n", Ok(QuestionAnswer::Decline)),
            ("sure", Ok(QuestionAnswer::Decline)),
        ] {
            let (answer, _) = run(&form_question(), &["y", "Ann", "30", "y", confirm]);
            assert_eq!(answer, expected, "{confirm:?}");
        }
    }

    #[test]
    fn declining_or_cancelling_the_form_asks_no_field() {
        for (opening, expected) in [
            ("n", QuestionAnswer::Decline),
            ("", QuestionAnswer::Decline),
            ("fill", QuestionAnswer::Decline),
            ("c", QuestionAnswer::Cancel),
            ("Cancel", QuestionAnswer::Cancel),
        ] {
            let (answer, shown) = run(&form_question(), &[opening, "Ann"]);
            assert_eq!(answer, Ok(expected), "{opening:?}");
            assert_eq!(shown.len(), 1, "{opening:?}: {shown:?}");
        }
    }

    #[test]
    fn a_url_is_accepted_only_when_the_person_says_it_is_done() {
        let question = ServerQuestion {
            server: "pay".into(),
            message: "link\u{1b}[8m your account".into(),
            asked: Asked::Url {
                url: "https://pay.example/\u{202e}login".into(),
            },
        };
        for (typed, expected) in [
            ("y", QuestionAnswer::Accept(Map::new())),
            ("n", QuestionAnswer::Decline),
            ("", QuestionAnswer::Decline),
            ("c", QuestionAnswer::Decline),
        ] {
            let (answer, shown) = run(&question, &[typed]);
            assert_eq!(answer, Ok(expected), "{typed:?}");
            assert!(
                shown[0].contains("\nURL: https://pay.example/<U+202E>login\n"),
                "{shown:?}"
            );
            assert!(
                !shown[0].chars().any(|c| hidden(c) && c != '\n'),
                "{shown:?}"
            );
            assert!(shown[0].ends_with(URL_QUESTION));
        }
    }

    #[test]
    fn end_of_input_is_unavailable_not_an_answer() {
        for lines in [&[][..], &["y"][..], &["y", "Ann", "3", "n"][..]] {
            let (answer, _) = run(&form_question(), lines);
            assert!(
                matches!(answer, Err(QuestionRefused::Unavailable(_))),
                "{lines:?}: {answer:?}"
            );
        }
    }

    #[test]
    fn an_answer_longer_than_the_terminal_keeps_is_not_cut_short() {
        let mut script = Script::typing(&["y"]);
        script.typed.push_back(Typed::TooLong { limit: 16 });
        script
            .typed
            .extend(["Ann", "", "", "y"].map(|l| Typed::Line(l.into())));
        let answer = Interview::of(&form_question()).unwrap().run(&mut script);
        assert_eq!(answer, accepted(json!({"name": "Ann", "news": false})));
        assert!(
            script.shown[2].contains("longer than 16 bytes"),
            "{}",
            script.shown[2]
        );
    }
}
