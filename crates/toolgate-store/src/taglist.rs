//! The user's own tags as stored by the toolsets: one comma-separated text column, lower-case,
//! trimmed, without a leading `#`, unique and sorted, so equal tag sets are equal strings.

/// The tags in a stored list.
pub fn split_tags(text: &str) -> Vec<&str> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

/// The stored form of a set of tags.
pub fn join_tags<'a>(tags: impl IntoIterator<Item = &'a str>) -> String {
    let mut set: Vec<String> = tags
        .into_iter()
        .map(|t| t.trim().trim_start_matches('#').trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    set.sort();
    set.dedup();
    set.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_tag_sets_store_as_equal_strings() {
        assert_eq!(join_tags(["Fav", " classic ", "#fav", ""]), "classic,fav");
        assert_eq!(join_tags(["classic", "fav"]), join_tags(["fav", "Classic"]));
        assert_eq!(split_tags("classic,fav"), ["classic", "fav"]);
        assert!(split_tags(" , ").is_empty());
    }
}
