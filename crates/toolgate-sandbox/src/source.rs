//! Two repairs of a script before it runs, for mistakes models make when they write code they
//! have seen JSON-encoded. Each touches only text that is always a Python syntax error, so it
//! changes no script that could have run, and each says how many it read, so the model learns
//! what happened.
//!
//! - [`repair_escaped_newlines`]: the whole script on one line, its line breaks written as the
//!   two characters `\n` (escaped twice). Outside a string literal `\n` is read as a line
//!   break; inside one it is an escape the script meant, and is left alone. Scripts with any
//!   real line break are never touched.
//! - [`repair_escaped_quotes`]: quotes written `\"` outside any string literal (a backslash
//!   there continues a line only before a line break). Such a quote is read as `"`, and the
//!   string it opens is closed by the next `\"`, also read as `"`. Why: the embedded model,
//!   retrying a failed script, copied its own code as the tool result showed it, JSON-escaped
//!   (`", ".join(hit[\"id\"])`), five times in
//!   `evals/runs/code-mode-failed-script-errors-sampled-embedded`.

/// The index just past the string literal whose opening quote is at `i` (an unclosed string
/// runs to the end); escapes inside it are skipped.
fn past_string(chars: &[char], i: usize) -> usize {
    let c = chars[i];
    let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
    let quote_len = if triple { 3 } else { 1 };
    let mut i = i + quote_len;
    while i < chars.len() {
        if chars[i] == '\\' {
            i += 2;
            continue;
        }
        if chars[i] == c
            && (!triple || (chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c)))
        {
            return i + quote_len;
        }
        i += 1;
    }
    chars.len()
}

/// `code` with each backslash outside a string literal offered to `repair`, which gets the
/// characters, the backslash's index and the output so far, and returns where to go on and how
/// many it read (`None`: the backslash is kept as it is); string literals are copied whole.
/// The text and the count of what was read.
fn repair_outside_strings(
    code: &str,
    mut repair: impl FnMut(&[char], usize, &mut String) -> Option<(usize, usize)>,
) -> (String, usize) {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut repaired = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let end = past_string(&chars, i);
            out.extend(&chars[i..end]);
            i = end;
            continue;
        }
        if c == '\\'
            && let Some((next, read)) = repair(&chars, i, &mut out)
        {
            repaired += read;
            i = next;
            continue;
        }
        out.push(c);
        i += 1;
    }
    (out, repaired)
}

/// The script with each `\"` outside string literals read as `"`, with the `\"` that closes
/// the string it opens; how many quotes were read. Unchanged (and 0) without such a quote.
pub fn repair_escaped_quotes(code: &str) -> (String, usize) {
    if !code.contains("\\\"") {
        return (code.to_owned(), 0);
    }
    repair_outside_strings(code, |chars, i, out| {
        if chars.get(i + 1) != Some(&'"') {
            return None;
        }
        // An escaped string: to the next escaped quote, both read as plain quotes.
        out.push('"');
        let mut i = i + 2;
        while i < chars.len() {
            if chars[i] == '\\' && chars.get(i + 1) == Some(&'"') {
                out.push('"');
                return Some((i + 2, 2));
            }
            out.push(chars[i]);
            i += 1;
        }
        Some((i, 1))
    })
}

/// The script with `\n` outside string literals read as line breaks, and how many there were;
/// the script unchanged (and 0) when it has a real line break.
pub fn repair_escaped_newlines(code: &str) -> (String, usize) {
    if code.contains('\n') || !code.contains("\\n") {
        return (code.to_owned(), 0);
    }
    repair_outside_strings(code, |chars, i, out| {
        (chars.get(i + 1) == Some(&'n')).then(|| {
            out.push('\n');
            (i + 2, 1)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_line_breaks_between_statements_become_line_breaks() {
        assert_eq!(
            repair_escaped_newlines("import os\\nprint(1)\\nprint(2)"),
            ("import os\nprint(1)\nprint(2)".to_owned(), 2)
        );
    }

    #[test]
    fn an_escape_inside_a_string_literal_is_what_the_script_meant() {
        let code = "print(\"a\\nb\")\\nprint('c\\nd')";
        assert_eq!(
            repair_escaped_newlines(code),
            ("print(\"a\\nb\")\nprint('c\\nd')".to_owned(), 1)
        );
    }

    #[test]
    fn a_script_with_real_line_breaks_is_never_touched() {
        let code = "x = 1\nprint('\\n')\\n";
        assert_eq!(repair_escaped_newlines(code), (code.to_owned(), 0));
    }

    #[test]
    fn triple_quoted_strings_and_escaped_quotes_are_skipped_whole() {
        let code = "s = '''a\\nb'''\\nt = \"q\\\"\\n\"\\nprint(s)";
        assert_eq!(
            repair_escaped_newlines(code),
            ("s = '''a\\nb'''\nt = \"q\\\"\\n\"\nprint(s)".to_owned(), 2)
        );
    }

    #[test]
    fn quotes_escaped_outside_strings_are_read_as_quotes_and_strings_are_left_alone() {
        let cases = [
            (
                "the retry's copy of a join",
                r#"print(len(hits), "notes:", \", \".join(str(hit[\"id\"]) for hit in hits))"#,
                r#"print(len(hits), "notes:", ", ".join(str(hit["id"]) for hit in hits))"#,
                4,
            ),
            (
                "an escaped quote inside a real string is the script's",
                r#"print("say \"hi\"", 'it\'s')"#,
                r#"print("say \"hi\"", 'it\'s')"#,
                0,
            ),
            (
                "a line continuation is not a quote",
                "x = 1 + \\\n    2\nprint(\"a\")",
                "x = 1 + \\\n    2\nprint(\"a\")",
                0,
            ),
            (
                "an escaped string that never closes runs to the end",
                r#"print(\"abc)"#,
                r#"print("abc)"#,
                1,
            ),
        ];
        for (what, code, repaired, count) in cases {
            assert_eq!(
                repair_escaped_quotes(code),
                (repaired.to_owned(), count),
                "{what}"
            );
        }
    }

    #[test]
    fn a_one_line_script_without_escapes_is_unchanged() {
        assert_eq!(
            repair_escaped_newlines("print(1)"),
            ("print(1)".to_owned(), 0)
        );
    }
}
