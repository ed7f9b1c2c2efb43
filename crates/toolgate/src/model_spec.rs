//! Which model a command talks to: `--model` parsed, or chosen from the environment (an
//! Anthropic key, else an OpenAI key, else the embedded model, which needs neither key nor
//! network).

use std::path::PathBuf;

/// Default remote model names when only a key is configured.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-haiku-4-5";
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1-mini";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// The embedded model; `None` is the fetched default file.
    Embedded(Option<PathBuf>),
    Anthropic(String),
    OpenAiChat(String),
    OpenAiResponses(String),
    /// An OpenAI-compatible server: base URL and model name.
    OpenAiCompat {
        base_url: String,
        model: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown model `{0}`: use embedded, embedded:FILE.gguf, anthropic:NAME, openai:NAME, \
     openai-responses:NAME or openai-compat:URL[#MODEL]"
)]
pub struct ModelSpecError(pub String);

impl std::str::FromStr for ModelSpec {
    type Err = ModelSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || ModelSpecError(text.to_string());
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (text, None),
        };
        let named = |r: Option<&str>| {
            r.filter(|n| !n.trim().is_empty())
                .map(|n| n.trim().to_string())
        };
        match kind {
            "embedded" => Ok(ModelSpec::Embedded(named(rest).map(PathBuf::from))),
            "anthropic" => named(rest).map(ModelSpec::Anthropic).ok_or_else(bad),
            "openai" => named(rest).map(ModelSpec::OpenAiChat).ok_or_else(bad),
            "openai-responses" => named(rest).map(ModelSpec::OpenAiResponses).ok_or_else(bad),
            "openai-compat" => {
                let rest = named(rest).ok_or_else(bad)?;
                let (base_url, model) = match rest.rsplit_once('#') {
                    Some((url, model)) if !model.is_empty() => (url.to_string(), model.to_string()),
                    _ => (rest.clone(), "local".to_string()),
                };
                if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                    return Err(bad());
                }
                Ok(ModelSpec::OpenAiCompat { base_url, model })
            }
            _ => Err(bad()),
        }
    }
}

/// The model to use when `--model` is not given, from which keys are set.
pub fn from_environment(anthropic_key: Option<&str>, openai_key: Option<&str>) -> ModelSpec {
    let set = |k: Option<&str>| k.is_some_and(|v| !v.trim().is_empty());
    if set(anthropic_key) {
        ModelSpec::Anthropic(DEFAULT_ANTHROPIC_MODEL.into())
    } else if set(openai_key) {
        ModelSpec::OpenAiChat(DEFAULT_OPENAI_MODEL.into())
    } else {
        ModelSpec::Embedded(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_spec_table() {
        let cases: Vec<(&str, Option<ModelSpec>)> = vec![
            ("embedded", Some(ModelSpec::Embedded(None))),
            (
                "embedded:/m/q.gguf",
                Some(ModelSpec::Embedded(Some("/m/q.gguf".into()))),
            ),
            (
                "anthropic:claude-x",
                Some(ModelSpec::Anthropic("claude-x".into())),
            ),
            ("openai:gpt-y", Some(ModelSpec::OpenAiChat("gpt-y".into()))),
            (
                "openai-responses:gpt-y",
                Some(ModelSpec::OpenAiResponses("gpt-y".into())),
            ),
            (
                "openai-compat:http://127.0.0.1:8080/v1",
                Some(ModelSpec::OpenAiCompat {
                    base_url: "http://127.0.0.1:8080/v1".into(),
                    model: "local".into(),
                }),
            ),
            (
                "openai-compat:http://127.0.0.1:11434/v1#qwen2.5",
                Some(ModelSpec::OpenAiCompat {
                    base_url: "http://127.0.0.1:11434/v1".into(),
                    model: "qwen2.5".into(),
                }),
            ),
            ("anthropic", None),
            ("anthropic:", None),
            ("openai-compat:localhost:8080", None),
            ("gemini:pro", None),
        ];
        for (text, expected) in cases {
            assert_eq!(text.parse::<ModelSpec>().ok(), expected, "{text}");
        }
    }

    #[test]
    fn environment_prefers_anthropic_then_openai_then_embedded() {
        assert_eq!(
            from_environment(Some("k"), Some("k")),
            ModelSpec::Anthropic(DEFAULT_ANTHROPIC_MODEL.into())
        );
        assert_eq!(
            from_environment(None, Some("k")),
            ModelSpec::OpenAiChat(DEFAULT_OPENAI_MODEL.into())
        );
        assert_eq!(from_environment(Some(" "), None), ModelSpec::Embedded(None));
        assert_eq!(from_environment(None, None), ModelSpec::Embedded(None));
    }
}
