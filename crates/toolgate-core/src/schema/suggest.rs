//! "Did you mean" suggestions for mistyped field and tool names.
//!
//! Guarantees: [`closest`] ranks candidates by edit distance, ignoring case, counts a name
//! that contains the wanted one (or is contained in it) as at most one edit away, breaks ties
//! by name, and never suggests a name further away than the wanted name is long (at least 3).
//!
//! Refuses: nothing; with no near candidate the list is empty.

/// Edit distance, for "did you mean" suggestions on field and tool names.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            row[j + 1] = substitution.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

/// The candidates closest to `wanted` (at most `n`), nearest first; ties by name.
pub fn closest<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| {
            let lower = c.to_lowercase();
            let mut d = edit_distance(&wanted_lower, &lower);
            if lower.contains(&wanted_lower) || wanted_lower.contains(&lower) {
                d = d.min(1);
            }
            (d, c)
        })
        .collect();
    scored.sort();
    let limit = wanted.chars().count().max(3);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(n)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names_prefers_near_misses() {
        let names = ["books_search", "books_get", "books_tag", "books_set_status"];
        assert_eq!(
            closest("book_search", names, 2),
            ["books_search", "books_get"]
        );
        assert_eq!(closest("search", names, 1), ["books_search"]);
        assert!(closest("zz", names, 3).is_empty());
    }
}
