//! Search snippets centred on the matched words: a few short fragments of a note's body, each
//! around a different place where the query's words occur, instead of one window that may
//! stop just before the part the question is about.
//!
//! Why our own code: FTS5's `snippet()` returns one fragment, placed where it finds the most
//! matches; a body whose answer follows a second, weaker mention of the words (a meeting note's
//! "Decisions: budget $48,000" below a first "the budget is settled") lost the answer. Which
//! words matched still comes from FTS5 (`highlight()` marks them with its own tokenizer and
//! stemmer), so this module only chooses windows.
//!
//! Guarantees: at most `fragments` fragments of at most `words` words each, in the order they
//! appear in the note, never overlapping, joined by " … " and marked with "…" where text was
//! cut; the first fragment is the one with the most distinct matched words (then the most
//! matches, then the earliest), each later one the best of what is left; a body with no
//! marked word gives its first `words` words. Pure.

/// What FTS5's `highlight()` is asked to put around each matched word.
pub const MARK_OPEN: char = '\u{1}';
pub const MARK_CLOSE: char = '\u{2}';

/// How many fragments of how many words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnippetShape {
    pub fragments: usize,
    pub words: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    /// The matched word, lower-cased, when FTS5 marked it.
    matched: Option<String>,
}

/// Splits highlighted text into whitespace-separated words, noting which were marked.
fn words_of(marked: &str) -> Vec<Word> {
    marked
        .split_whitespace()
        .map(|chunk| {
            let matched = chunk.contains(MARK_OPEN).then(|| {
                chunk
                    .split(MARK_OPEN)
                    .skip(1)
                    .filter_map(|part| part.split(MARK_CLOSE).next())
                    .collect::<String>()
                    .to_lowercase()
            });
            Word {
                text: chunk.replace([MARK_OPEN, MARK_CLOSE], ""),
                matched,
            }
        })
        .filter(|w| !w.text.is_empty())
        .collect()
}

/// A window `[start, start + len)` and how well it covers the matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    start: usize,
    len: usize,
    distinct: usize,
    matches: usize,
    /// Twice the distance between the window's centre and its matches' centre (lower is
    /// better centred).
    off_centre: usize,
}

fn window_around(words: &[Word], centre: usize, len: usize) -> Window {
    let len = len.min(words.len());
    let start = centre
        .saturating_sub(len / 2)
        .min(words.len().saturating_sub(len));
    let inside = &words[start..start + len];
    let mut distinct: Vec<&str> = Vec::new();
    let mut positions = Vec::new();
    for (i, w) in inside.iter().enumerate() {
        if let Some(m) = &w.matched {
            positions.push(start + i);
            if !distinct.contains(&m.as_str()) {
                distinct.push(m);
            }
        }
    }
    let off_centre = match (positions.first(), positions.last()) {
        (Some(first), Some(last)) => (2 * start + len).abs_diff(first + last),
        _ => usize::MAX,
    };
    Window {
        start,
        len,
        distinct: distinct.len(),
        matches: positions.len(),
        off_centre,
    }
}

fn overlaps(a: &Window, b: &Window) -> bool {
    a.start < b.start + b.len && b.start < a.start + a.len
}

/// The snippet of a body that FTS5's `highlight()` marked; see the module documentation.
pub fn centred_snippet(marked: &str, shape: SnippetShape) -> String {
    let words = words_of(marked);
    if words.is_empty() || shape.words == 0 || shape.fragments == 0 {
        return String::new();
    }
    let mut candidates: Vec<Window> = words
        .iter()
        .enumerate()
        .filter(|(_, w)| w.matched.is_some())
        .map(|(i, _)| window_around(&words, i, shape.words))
        .collect();
    // Best first: most distinct words, most matches, best centred, earliest.
    candidates.sort_by(|a, b| {
        b.distinct
            .cmp(&a.distinct)
            .then(b.matches.cmp(&a.matches))
            .then(a.off_centre.cmp(&b.off_centre))
            .then(a.start.cmp(&b.start))
    });
    let mut chosen: Vec<Window> = Vec::new();
    for candidate in candidates {
        if chosen.len() == shape.fragments {
            break;
        }
        if !chosen.iter().any(|c| overlaps(c, &candidate)) {
            chosen.push(candidate);
        }
    }
    if chosen.is_empty() {
        chosen.push(window_around(&words, shape.words / 2, shape.words));
    }
    chosen.sort_by_key(|w| w.start);
    let mut out = String::new();
    let mut end_of_last = 0;
    for window in &chosen {
        if window.start > end_of_last {
            out.push_str(if out.is_empty() { "…" } else { " … " });
        } else if !out.is_empty() {
            out.push(' ');
        }
        let text: Vec<&str> = words[window.start..window.start + window.len]
            .iter()
            .map(|w| w.text.as_str())
            .collect();
        out.push_str(&text.join(" "));
        end_of_last = window.start + window.len;
    }
    if end_of_last < words.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(text: &str, terms: &[&str]) -> String {
        text.split(' ')
            .map(|w| {
                let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
                if terms.contains(&bare.to_lowercase().as_str()) {
                    w.replacen(bare, &format!("{MARK_OPEN}{bare}{MARK_CLOSE}"), 1)
                } else {
                    w.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    const CONCISE: SnippetShape = SnippetShape {
        fragments: 2,
        words: 12,
    };

    #[test]
    fn a_figure_after_a_second_mention_is_not_cut_off() {
        let body = "Attendees: Priya, Marco, Lena, Tomás (finance), me. ## Budget The design team budget is settled. \
                    Lena's reduced motion-study package came in at $6,000, which gave us the middle option finance asked for. \
                    We settled on $48,000 for Q1: the in-house redesign of the checkout flow plus the smaller motion study. \
                    ## Decisions - Q1 design budget: $48,000, final. - The agency retainer is dropped.";
        let snippet = centred_snippet(&mark(body, &["design", "team", "budget"]), CONCISE);
        assert!(
            snippet.contains("design team budget is settled"),
            "{snippet}"
        );
        assert!(snippet.contains("$48,000"), "{snippet}");
        assert!(
            snippet.split_whitespace().count() <= 2 * 12 + 3,
            "{snippet}"
        );
    }

    #[test]
    fn fragments_keep_note_order_and_never_repeat_text() {
        let body = "alpha one two three four five six seven eight nine ten eleven twelve \
                    beta gamma x y z";
        let snippet = centred_snippet(
            &mark(body, &["alpha", "beta", "gamma"]),
            SnippetShape {
                fragments: 2,
                words: 4,
            },
        );
        assert_eq!(snippet, "alpha one two three … eleven twelve beta gamma…");
    }

    #[test]
    fn a_body_without_marks_gives_its_opening_words() {
        let snippet = centred_snippet(
            "one two three four five",
            SnippetShape {
                fragments: 2,
                words: 3,
            },
        );
        assert_eq!(snippet, "one two three…");
    }

    #[test]
    fn a_short_body_is_shown_whole_without_cut_marks() {
        let snippet = centred_snippet(&mark("the budget is final", &["budget"]), CONCISE);
        assert_eq!(snippet, "the budget is final");
    }

    #[test]
    fn a_marker_inside_a_word_keeps_the_word_whole() {
        let words = words_of("pre\u{1}budget\u{2}s, \u{1}team\u{2}");
        assert_eq!(words[0].text, "prebudgets,");
        assert_eq!(words[0].matched.as_deref(), Some("budget"));
        assert_eq!(words[1].matched.as_deref(), Some("team"));
    }

    #[test]
    fn no_fragments_asked_gives_nothing() {
        let shape = SnippetShape {
            fragments: 0,
            words: 5,
        };
        assert_eq!(centred_snippet("\u{1}a\u{2} b", shape), "");
    }
}
