//! Notebooks named the way the user names them: "my reading notebook", "the Recipes
//! Notebook". `notes-v5`'s `web_clip` takes its `notebook` this way (the model copies the
//! user's words, and "Reading notebook" made a second notebook beside "Reading").
//!
//! Guarantees: a name that is an existing notebook (whatever its case) is that notebook, even
//! when it ends in "notebook"; otherwise a leading "my", "the" or "our" and a trailing
//! "notebook" are words about the notebook, not its name, and the rest is matched the same
//! way; a name that is still no existing notebook is then judged as [`resolve_notebook`]
//! judges any name (a near miss is refused as a likely typo, anything else starts a new
//! notebook, without the dropped words). Refuses only what [`resolve_notebook`] refuses.

use toolgate_core::ToolError;
use toolgate_core::sql::Sql;

use crate::rows;
use crate::tools::resolve_notebook;

const LEADING_WORDS: [&str; 3] = ["my", "the", "our"];
const TRAILING_WORDS: [&str; 2] = ["notebook", "notebooks"];

/// The notebook the user's words name; see the module documentation.
pub(crate) fn resolve_notebook_by_words(
    conn: &dyn Sql,
    given: Option<&str>,
) -> Result<String, ToolError> {
    let Some(given) = given.map(str::trim).filter(|g| !g.is_empty()) else {
        return resolve_notebook(conn, None);
    };
    let existing = rows::notebooks(conn)?;
    if let Some(same) = existing.iter().find(|n| n.eq_ignore_ascii_case(given)) {
        return Ok(same.clone());
    }
    let name = notebook_name(given);
    if let Some(same) = existing.iter().find(|n| n.eq_ignore_ascii_case(name)) {
        return Ok(same.clone());
    }
    resolve_notebook(conn, Some(name))
}

/// `words` without the words about a notebook around its name ("my reading notebook" →
/// "reading"); `words` itself when nothing would be left.
pub fn notebook_name(words: &str) -> &str {
    let mut name = words.trim();
    if let Some((first, rest)) = name.split_once(char::is_whitespace)
        && LEADING_WORDS.iter().any(|w| w.eq_ignore_ascii_case(first))
    {
        name = rest.trim_start();
    }
    if let Some((rest, last)) = name.rsplit_once(char::is_whitespace)
        && TRAILING_WORDS.iter().any(|w| w.eq_ignore_ascii_case(last))
    {
        name = rest.trim_end();
    }
    if name.is_empty() { words.trim() } else { name }
}

#[cfg(test)]
mod tests {
    use super::notebook_name;

    #[test]
    fn the_words_about_a_notebook_are_dropped_from_its_name() {
        for (words, name) in [
            ("Reading notebook", "Reading"),
            ("Reading Notebook", "Reading"),
            ("my reading notebook", "reading"),
            ("the Recipes notebook", "Recipes"),
            ("our  Work   notebooks", "Work"),
            ("Recipes", "Recipes"),
            ("notebook", "notebook"),
            ("my notebook", "notebook"),
            ("Travel plans", "Travel plans"),
            ("Mythology", "Mythology"),
        ] {
            assert_eq!(notebook_name(words), name, "{words}");
        }
    }
}
