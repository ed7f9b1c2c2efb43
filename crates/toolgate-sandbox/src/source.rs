//! One repair of a script before it runs, for a mistake models make when they write code inside
//! a JSON string: the whole script on one line, its line breaks written as the two characters
//! `\n` (escaped twice). Outside a string literal, `\n` is always a Python syntax error, so
//! reading it as a line break changes no script that could have run; inside a string literal
//! it is an escape the script meant, and is left alone. Scripts with any real line break are
//! never touched. The result says how many were read, so the model learns what happened.

/// The script with `\n` outside string literals read as line breaks, and how many there were;
/// the script unchanged (and 0) when it has a real line break.
pub fn repair_escaped_newlines(code: &str) -> (String, usize) {
    if code.contains('\n') || !code.contains("\\n") {
        return (code.to_owned(), 0);
    }
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut repaired = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
            let quote_len = if triple { 3 } else { 1 };
            let start = i;
            i += quote_len;
            // To the closing quote, escapes skipped; an unclosed string runs to the end.
            while i < chars.len() {
                if chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i] == c
                    && (!triple || (chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c)))
                {
                    i += quote_len;
                    break;
                }
                i += 1;
            }
            out.extend(&chars[start..i.min(chars.len())]);
            continue;
        }
        if c == '\\' && chars.get(i + 1) == Some(&'n') {
            out.push('\n');
            repaired += 1;
            i += 2;
            continue;
        }
        out.push(c);
        i += 1;
    }
    (out, repaired)
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
    fn a_one_line_script_without_escapes_is_unchanged() {
        assert_eq!(
            repair_escaped_newlines("print(1)"),
            ("print(1)".to_owned(), 0)
        );
    }
}
