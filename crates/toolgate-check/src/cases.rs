//! Case files: the repository's own, compiled in, and any a reviewer adds with `--cases FILE`.
//!
//! Each suite declares its own file type (a struct with `deny_unknown_fields`, documented in
//! the suite's module) and hands it to [`load_cases`]. Guarantees: every file is parsed whole
//! or the load fails naming it (nothing is half-loaded); ids are unique across all files
//! ([`unique_ids`]); an empty set of cases is an error, because a suite that checked nothing
//! must not report a pass.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

use crate::error::CheckError;

/// A case file as loaded: where it came from (a repository path for the built-in files, the
/// path given for the others) and what it holds.
#[derive(Debug, Clone)]
pub struct CaseSource<F> {
    pub origin: String,
    pub file: F,
}

/// Parses the built-in files (`(repository path, text)`, usually `include_str!`) and then each
/// extra file, in order.
pub fn load_cases<F: DeserializeOwned>(
    builtin: &[(&str, &str)],
    extra: &[PathBuf],
) -> Result<Vec<CaseSource<F>>, CheckError> {
    let mut loaded = Vec::with_capacity(builtin.len() + extra.len());
    for (origin, text) in builtin {
        loaded.push(CaseSource {
            origin: (*origin).to_string(),
            file: parse(origin, text)?,
        });
    }
    for path in extra {
        let text = std::fs::read_to_string(path).map_err(|e| CheckError::Cases {
            path: path.clone(),
            message: format!("cannot be read: {e}"),
        })?;
        let origin = path.display().to_string();
        loaded.push(CaseSource {
            file: parse(&origin, &text)?,
            origin,
        });
    }
    Ok(loaded)
}

fn parse<F: DeserializeOwned>(origin: &str, text: &str) -> Result<F, CheckError> {
    toml::from_str(text).map_err(|e| CheckError::Cases {
        path: PathBuf::from(origin),
        message: e.to_string(),
    })
}

/// Refuses a duplicate id (naming both files) and an empty list; `ids` yields `(origin, id)`.
pub fn unique_ids<'a>(ids: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<(), CheckError> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    let mut last_origin = None;
    for (origin, id) in ids {
        last_origin = Some(origin);
        if id.trim().is_empty() {
            return Err(CheckError::Cases {
                path: PathBuf::from(origin),
                message: "a case has an empty id".into(),
            });
        }
        if let Some(first) = seen.insert(id, origin) {
            return Err(CheckError::Cases {
                path: PathBuf::from(origin),
                message: format!("case id `{id}` is already used in {first}"),
            });
        }
    }
    if last_origin.is_none() {
        return Err(CheckError::Cases {
            path: PathBuf::from("(no case files)"),
            message: "no cases to run: a suite that checks nothing cannot pass".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        case: Vec<Case>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Case {
        id: String,
    }

    #[test]
    fn unknown_field_is_refused_naming_the_file() {
        let err = load_cases::<File>(
            &[("security/x.toml", "[[case]]\nid = \"a\"\nexpect = 1\n")],
            &[],
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("security/x.toml"), "{text}");
        assert!(text.contains("expect"), "{text}");
    }

    #[test]
    fn duplicate_id_across_files_is_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let extra = dir.path().join("mine.toml");
        std::fs::write(&extra, "[[case]]\nid = \"a\"\n").unwrap();
        let files =
            load_cases::<File>(&[("security/x.toml", "[[case]]\nid = \"a\"\n")], &[extra]).unwrap();
        let ids = files.iter().flat_map(|f| {
            f.file
                .case
                .iter()
                .map(|c| (f.origin.as_str(), c.id.as_str()))
        });
        let text = unique_ids(ids).unwrap_err().to_string();
        assert!(
            text.contains("mine.toml") && text.contains("security/x.toml"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_case_list_cannot_pass() {
        assert!(unique_ids(std::iter::empty()).is_err());
    }

    #[test]
    fn missing_extra_file_is_a_clear_error() {
        let err = load_cases::<File>(&[], &[PathBuf::from("/nonexistent/cases.toml")]).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/cases.toml"));
    }
}
