//! An error and its causes as one line of text, for messages a person or a model reads.
//!
//! Guarantees: [`error_chain`] writes the error, then each source in order, joined with `: `,
//! and skips a source whose text the line already holds (libraries often repeat their cause in
//! their own message), so the line names each cause once. It follows `source()` to the end: the
//! chain of a `std::error::Error` is finite by construction. It adds nothing of its own and
//! bounds nothing: a caller that shows the line where size matters cuts it.

use std::error::Error;

/// `error` and its sources, each once, joined with `: `.
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer {
        message: &'static str,
        source: Option<Box<Layer>>,
    }

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.message)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.source.as_deref().map(|s| s as &(dyn Error + 'static))
        }
    }

    fn layers(messages: &[&'static str]) -> Layer {
        let mut chain: Option<Box<Layer>> = None;
        for message in messages.iter().rev() {
            chain = Some(Box::new(Layer {
                message,
                source: chain,
            }));
        }
        *chain.unwrap()
    }

    #[test]
    fn a_cause_is_named_once_and_in_order() {
        let table: [(&[&'static str], &str); 4] = [
            (&["alone"], "alone"),
            (
                &["request failed", "connection refused"],
                "request failed: connection refused",
            ),
            (
                &[
                    "discovery failed: egress refused",
                    "egress refused",
                    "host not listed",
                ],
                "discovery failed: egress refused: host not listed",
            ),
            (&["a", "b", "c"], "a: b: c"),
        ];
        for (messages, expected) in table {
            assert_eq!(error_chain(&layers(messages)), expected, "{messages:?}");
        }
    }
}
