//! Token counts with a real tokenizer (OpenAI's o200k BPE, embedded by `tiktoken-rs`): the
//! standing cost of tool definitions and the cost of results, as a model would be billed.

use serde_json::Value;

use toolgate_core::spec::ModelView;

/// Tokens in `text` under o200k_base.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// Tokens of a JSON value in compact form.
pub fn count_json(value: &Value) -> usize {
    count(&value.to_string())
}

/// The standing cost of a set of tool definitions, as sent in every request.
pub fn count_definitions(views: &[ModelView]) -> usize {
    views
        .iter()
        .map(|v| count_json(&serde_json::to_value(v).unwrap_or(Value::Null)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_strings_have_known_counts() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert!(count("The Hunger Games (The Hunger Games, #1)") > 5);
    }
}
