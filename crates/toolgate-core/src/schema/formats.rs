//! The string formats the validator checks: `date` (a calendar date written `YYYY-MM-DD`),
//! `email` and `uri`.
//!
//! Guarantees: [`is_iso_date`] accepts only a real calendar date in exactly ten ASCII
//! characters, leap years counted; the checks are pure.
//!
//! Refuses: relative dates, times, non-ASCII digits, malformed addresses and URIs, and every
//! value of any other format (a format we do not know fails rather than passes unchecked;
//! normalization and the validator refuse such schemas before it comes to that).

/// Whether `text` is a calendar date written `YYYY-MM-DD`.
pub fn is_iso_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(r)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day)
}

pub(super) fn format_matches(format: &str, text: &str) -> bool {
    match format {
        "date" => is_iso_date(text),
        "email" => {
            let mut parts = text.split('@');
            matches!((parts.next(), parts.next(), parts.next()),
                (Some(local), Some(domain), None)
                    if !local.is_empty() && domain.contains('.') && !domain.starts_with('.')
                        && !domain.ends_with('.') && !text.chars().any(char::is_whitespace))
        }
        "uri" => text.split_once("://").is_some_and(|(scheme, rest)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !text.chars().any(char::is_whitespace)
        }),
        // normalize() refuses other formats; refuse values rather than pass them unchecked.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_date_table() {
        for (text, ok) in [
            ("2026-11-29", true),
            ("2024-02-29", true),
            ("2023-02-29", false),
            ("2026-13-01", false),
            ("2026-1-01", false),
            ("tomorrow", false),
            ("2026-11-29T00:00", false),
            ("２０２６-11-29", false),
        ] {
            assert_eq!(is_iso_date(text), ok, "{text}");
        }
    }
}
