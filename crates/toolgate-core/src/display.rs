//! Text a person reads to decide (an approval's arguments and preview), made safe to show.
//!
//! Guarantees: [`visible`] returns text in which no character can act on a terminal or change
//! how the rest is read: every control character (C0 but the newline, DEL, C1, so ESC and CR
//! too), every Unicode format character (category Cf: the bidirectional embeddings, overrides
//! and isolates, the marks U+200E/U+200F/U+061C, the zero-width U+200B-U+200D, U+FEFF, tag
//! characters...) and the line and paragraph separators (U+2028, U+2029) are written as
//! visible ASCII (`<ESC>`, `<CR>`, `<U+202E>`). Newlines stay: the caller starts each line with
//! its own prefix, so a line cannot pass for another part of the text. [`visible_line`] also
//! writes newlines as `<LF>`, for values shown on one line. Both are pure, idempotent, and
//! borrow when nothing needs escaping.
//!
//! What it does not do: judge the words themselves (a text can still say "approved"); it only
//! makes sure every character that is there can be seen.

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_general_category::{GeneralCategory, get_general_category};

/// `text` with every character that could hide or rewrite what a person reads shown visibly;
/// newlines kept.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// As [`visible`], and a newline shown as `<LF>`: for a value shown on one line.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Whether `c` must be shown as a name rather than written as is.
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            get_general_category(c),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
}

fn escape(text: &str, newline_too: bool) -> Cow<'_, str> {
    let must = |c: char| hidden(c) && (newline_too || c != '\n');
    if !text.chars().any(must) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if must(c) {
            push_name(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn push_name(out: &mut String, c: char) {
    let name = match c {
        '\n' => "<LF>",
        '\r' => "<CR>",
        '\t' => "<TAB>",
        '\u{1b}' => "<ESC>",
        '\u{8}' => "<BS>",
        '\u{7f}' => "<DEL>",
        _ => {
            // Writing to a String cannot fail.
            let _ = write!(out, "<U+{:04X}>", u32::from(c));
            return;
        }
    };
    out.push_str(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_that_hide_or_rewrite_text_are_shown_by_name() {
        let cases: &[(&str, &str, &str)] = &[
            ("plain text borrows", "See you Friday.", "See you Friday."),
            (
                "cursor-up and erase-line cannot hide the line before",
                "SECRET: x\x1b[1A\x1b[2K",
                "SECRET: x<ESC>[1A<ESC>[2K",
            ),
            (
                "a carriage return cannot overwrite a line",
                "send to eve\rsend to ann",
                "send to eve<CR>send to ann",
            ),
            ("a newline stays", "one\ntwo", "one\ntwo"),
            ("a tab is named", "a\tb", "a<TAB>b"),
            (
                "backspace is named",
                "ann\u{8}\u{8}\u{8}eve",
                "ann<BS><BS><BS>eve",
            ),
            ("DEL is named", "a\u{7f}", "a<DEL>"),
            ("a C1 control (CSI) is named", "a\u{9b}2J", "a<U+009B>2J"),
            ("NUL is named", "a\0b", "a<U+0000>b"),
            (
                "a right-to-left override cannot reorder a recipient",
                "ann@example.org\u{202e}gro.elpmaxe@eve",
                "ann@example.org<U+202E>gro.elpmaxe@eve",
            ),
            (
                "isolates are named",
                "\u{2066}x\u{2067}y\u{2068}z\u{2069}",
                "<U+2066>x<U+2067>y<U+2068>z<U+2069>",
            ),
            (
                "embeddings and pop are named",
                "\u{202a}\u{202b}\u{202c}\u{202d}",
                "<U+202A><U+202B><U+202C><U+202D>",
            ),
            (
                "direction marks are named",
                "\u{200e}\u{200f}\u{61c}",
                "<U+200E><U+200F><U+061C>",
            ),
            (
                "zero-width characters are named",
                "e\u{200b}v\u{200c}e\u{200d}",
                "e<U+200B>v<U+200C>e<U+200D>",
            ),
            ("a byte order mark is named", "\u{feff}hi", "<U+FEFF>hi"),
            (
                "a soft hyphen (Cf) is named",
                "pay\u{ad}pal",
                "pay<U+00AD>pal",
            ),
            ("tag characters (Cf) are named", "x\u{e0041}", "x<U+E0041>"),
            (
                "line and paragraph separators are named",
                "a\u{2028}b\u{2029}c",
                "a<U+2028>b<U+2029>c",
            ),
            (
                "letters, accents and emoji stay",
                "Zoë 東京 👍",
                "Zoë 東京 👍",
            ),
        ];
        for (what, input, want) in cases {
            let got = visible(input);
            assert_eq!(got, *want, "{what}");
            assert_eq!(visible(&got), got, "{what}: escaping twice changes nothing");
            assert!(!got.chars().any(|c| hidden(c) && c != '\n'), "{what}");
        }
        assert!(matches!(visible("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_one_line_value_cannot_start_a_line_of_its_own() {
        for (input, want) in [
            (
                "Budget\nWhy it needs approval: none",
                "Budget<LF>Why it needs approval: none",
            ),
            ("x\r\ny", "x<CR><LF>y"),
            ("plain", "plain"),
        ] {
            assert_eq!(visible_line(input), want, "{input:?}");
        }
    }
}
