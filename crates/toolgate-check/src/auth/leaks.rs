//! Whether any token, or a substantial part of one, appears in a text the suite collected (the
//! JSON Lines trace, the server's captured log, the stores, the report). Pure.
//!
//! A token is found when the text holds the whole token, or a run of at least
//! [`SUBSTANTIAL`] characters from its payload or signature (what makes a token usable or says
//! whom it speaks for; the header alone is the same for every token of the server, so it is
//! not counted). Tokens shorter than [`SHORTEST`] characters (raw test strings like `abc`) are
//! only looked for whole if they are at least that long, so that ordinary words are not
//! reported as leaks.

use aho_corasick::AhoCorasick;

/// The shortest run of a token's payload or signature that counts as a leak.
pub const SUBSTANTIAL: usize = 36;
/// Windows looked for: every run of [`SUBSTANTIAL`] characters holds one of them whole.
const WINDOW: usize = 24;
const STEP: usize = SUBSTANTIAL - WINDOW + 1;
/// Tokens shorter than this are not looked for.
pub const SHORTEST: usize = 16;

/// Where a token was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The index of the token in the list given.
    pub token: usize,
    /// 1-based line of the text.
    pub line: usize,
    /// Whether the whole token is there (else a part of it).
    pub whole: bool,
}

/// Finds tokens in texts; built once for a set of tokens.
pub struct Scanner {
    automaton: Option<AhoCorasick>,
    /// For each pattern: the token it comes from and whether it is the whole token.
    origins: Vec<(usize, bool)>,
}

impl Scanner {
    pub fn new(tokens: &[String]) -> Result<Scanner, String> {
        let mut patterns: Vec<String> = Vec::new();
        let mut origins = Vec::new();
        for (index, token) in tokens.iter().enumerate() {
            if token.len() < SHORTEST {
                continue;
            }
            patterns.push(token.clone());
            origins.push((index, true));
            for segment in token.split('.').skip(1) {
                for window in windows(segment) {
                    patterns.push(window.to_string());
                    origins.push((index, false));
                }
            }
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::new(&patterns)
                    .map_err(|e| format!("cannot build the token scanner: {e}"))?,
            )
        };
        Ok(Scanner { automaton, origins })
    }

    /// The first place each token appears in `text`, in token order (whole-token matches
    /// preferred over parts on the same line).
    pub fn find(&self, text: &str) -> Vec<Found> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        let mut first: std::collections::BTreeMap<usize, Found> = Default::default();
        for hit in automaton.find_overlapping_iter(text) {
            let (token, whole) = self.origins[hit.pattern().as_usize()];
            let line = text[..hit.start()].matches('\n').count() + 1;
            let found = Found { token, line, whole };
            first
                .entry(token)
                .and_modify(|f| {
                    if (line, !whole) < (f.line, !f.whole) {
                        *f = found.clone();
                    }
                })
                .or_insert(found);
        }
        first.into_values().collect()
    }
}

/// The windows of `segment` looked for (none when it is shorter than a window).
fn windows(segment: &str) -> Vec<&str> {
    if !segment.is_ascii() || segment.len() < WINDOW {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start + WINDOW <= segment.len() {
        out.push(&segment[start..start + WINDOW]);
        start += STEP;
    }
    // The tail, so that a run at the very end is covered too.
    let tail = &segment[segment.len() - WINDOW..];
    if out.last() != Some(&tail) {
        out.push(tail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> String {
        let payload = "eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjQ1MDAxIiwic3ViIjoic3VpdGUtdXNlciJ9";
        let signature = "c2lnbmF0dXJlLW9mLXRoZS10b2tlbi10aGF0LWlzLWxvbmctZW5vdWdo";
        format!("eyJhbGciOiJSUzI1NiJ9.{payload}.{signature}")
    }

    #[test]
    fn a_token_is_found_whole_or_by_any_substantial_run_of_its_payload_or_signature() {
        let token = token();
        let scanner = Scanner::new(std::slice::from_ref(&token)).unwrap();
        let signature = token.rsplit('.').next().unwrap();
        let payload = token.split('.').nth(1).unwrap();
        let cases: Vec<(String, Option<(usize, bool)>)> = vec![
            (format!("a\nBearer {token}\n"), Some((2, true))),
            (format!("sig={signature}"), Some((1, false))),
            // Any 36 characters of the signature, wherever they start.
            (
                format!("x {} y", &signature[7..7 + SUBSTANTIAL]),
                Some((1, false)),
            ),
            (
                format!("x {} y", &signature[signature.len() - SUBSTANTIAL..]),
                Some((1, false)),
            ),
            (payload[3..3 + SUBSTANTIAL].to_string(), Some((1, false))),
            // Cut to its first 20 characters: the header only, not the token.
            (format!("token={}...", &token[..20]), None),
            (signature[..20].to_string(), None),
            ("nothing here".into(), None),
        ];
        for (text, expected) in cases {
            let found = scanner.find(&text);
            assert_eq!(found.first().map(|f| (f.line, f.whole)), expected, "{text}");
        }
    }

    #[test]
    fn each_token_is_reported_once_at_its_first_line() {
        let a = token();
        let b = format!("{a}x").replace("c2ln", "ZGlm");
        let scanner = Scanner::new(&[a.clone(), b.clone()]).unwrap();
        let text = format!("ok\n{b}\n{a}\n{a}\n");
        let found = scanner.find(&text);
        let lines: Vec<(usize, usize)> = found.iter().map(|f| (f.token, f.line)).collect();
        // b holds a's payload and most of a's signature: a is found on line 2 already.
        assert_eq!(lines, [(0, 2), (1, 2)]);
    }

    #[test]
    fn short_test_strings_are_not_looked_for() {
        let scanner = Scanner::new(&["abc".into(), "not-a-jwt".into()]).unwrap();
        assert!(scanner.find("abc not-a-jwt").is_empty());
    }
}
