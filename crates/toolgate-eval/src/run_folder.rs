//! The resumable run folder that the suite eval ([`crate::runner`]) and the tool-search eval
//! ([`crate::tool_search`]) share: `plan.json`, everything that defines the measurement, and
//! `runs.jsonl`, one record a line, appended as each run finishes.
//!
//! Guarantees:
//! - A folder without a plan is created and gets its plan before any run. A folder that holds
//!   a plan is refused unless the caller resumes ([`RunFolderError::Exists`]).
//! - A resume whose plan differs from the one on disk in a setting the plan names
//!   ([`ResumablePlan::differences`]) is refused, naming every such setting
//!   ([`RunFolderError::Mismatch`]), and the folder is left as it was. A plan that may grow on
//!   resume (the tool-search eval's sizes and modes) is rewritten as
//!   [`ResumablePlan::merged`] says, after its records have been read; a plan that does not
//!   grow is never rewritten.
//! - A resume returns the records already in the folder, so the caller skips those runs. A
//!   last line cut off by a kill (no final newline) is dropped and removed from the file, so
//!   the next append starts on a fresh line; any complete line that is not a record is refused
//!   with the file's name ([`RunFolderError::Unreadable`]), never skipped.
//! - [`RunAppender::append`] writes one record as one line and flushes it before it returns:
//!   an interrupted eval loses at most the run in progress.
//!
//! Each eval turns a [`RunFolderError`] into its own error type, whose messages name the eval.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Where a run folder keeps its plan.
pub const PLAN_FILE: &str = "plan.json";
/// Where a run folder keeps its records, one JSON object a line.
pub const RUNS_FILE: &str = "runs.jsonl";

/// A plan that a resume must match.
pub trait ResumablePlan: Serialize + DeserializeOwned + Clone + PartialEq {
    /// The names of the settings in which `resumed` differs from `self` (the plan on disk),
    /// in a fixed order; empty when the resume may continue.
    fn differences(&self, resumed: &Self) -> Vec<String>;

    /// The plan on disk after a resume that matches: by default the one already there.
    fn merged(&self, _resumed: &Self) -> Self {
        self.clone()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunFolderError {
    #[error("{dir} already holds a plan; pass --resume to continue it, or choose another --out")]
    Exists { dir: String },
    #[error("cannot resume {dir}: it was started with different settings ({})", differences.join(", "))]
    Mismatch {
        dir: String,
        differences: Vec<String>,
    },
    /// The plan or a record does not parse: the parser's message (a record's prefixed with
    /// "unreadable record: ").
    #[error("{path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RunFolderError + '_ {
    move |source| RunFolderError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The run folder at one path.
#[derive(Debug, Clone)]
pub struct RunFolder {
    dir: PathBuf,
}

impl RunFolder {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RunFolder { dir: dir.into() }
    }

    pub fn plan_path(&self) -> PathBuf {
        self.dir.join(PLAN_FILE)
    }

    pub fn runs_path(&self) -> PathBuf {
        self.dir.join(RUNS_FILE)
    }

    /// Starts the folder with `plan`, or (with `resume`) checks it against the plan on disk;
    /// returns the records already there (none for a new folder).
    pub fn open<P: ResumablePlan, R: DeserializeOwned>(
        &self,
        plan: &P,
        resume: bool,
    ) -> Result<Vec<R>, RunFolderError> {
        let plan_path = self.plan_path();
        if plan_path.exists() {
            if !resume {
                return Err(RunFolderError::Exists {
                    dir: self.dir.display().to_string(),
                });
            }
            let text = std::fs::read_to_string(&plan_path).map_err(io(&plan_path))?;
            let earlier: P =
                serde_json::from_str(&text).map_err(|e| RunFolderError::Unreadable {
                    path: plan_path.display().to_string(),
                    message: e.to_string(),
                })?;
            let differences = earlier.differences(plan);
            if !differences.is_empty() {
                return Err(RunFolderError::Mismatch {
                    dir: self.dir.display().to_string(),
                    differences,
                });
            }
            let records = read_records(&self.runs_path())?;
            let merged = earlier.merged(plan);
            if merged != earlier {
                write_plan(&plan_path, &merged)?;
            }
            return Ok(records);
        }
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        write_plan(&plan_path, plan)?;
        Ok(Vec::new())
    }

    /// Opens `runs.jsonl` for appending (creating it when missing).
    pub fn appender(&self) -> Result<RunAppender, RunFolderError> {
        let path = self.runs_path();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok(RunAppender { file, path })
    }
}

fn write_plan<P: Serialize>(path: &Path, plan: &P) -> Result<(), RunFolderError> {
    let text = serde_json::to_string_pretty(plan).unwrap_or_default();
    std::fs::write(path, text).map_err(io(path))
}

/// Appends records to a run folder's `runs.jsonl`.
pub struct RunAppender {
    file: File,
    path: PathBuf,
}

impl RunAppender {
    /// Writes `record` as one line and flushes it.
    pub fn append<R: Serialize>(&mut self, record: &R) -> Result<(), RunFolderError> {
        let line = serde_json::to_string(record).unwrap_or_default();
        writeln!(self.file, "{line}")
            .and_then(|()| self.file.flush())
            .map_err(io(&self.path))
    }
}

/// Why a JSON Lines record file could not be read.
#[derive(Debug)]
pub enum RecordsError {
    Io(std::io::Error),
    /// A complete line that is not a record: the parser's message.
    Parse(String),
}

/// Reads the JSON Lines records at `path` (none when it is missing); a last line cut off by a
/// kill is dropped, and removed from the file so appends start on a fresh line. Shared by every
/// eval that saves its runs as they finish.
pub fn load_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, RecordsError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path).map_err(RecordsError::Io)?;
    let complete_len = if text.ends_with('\n') || text.is_empty() {
        text.len()
    } else {
        text.rfind('\n').map_or(0, |i| i + 1)
    };
    if complete_len < text.len() {
        std::fs::write(path, &text[..complete_len]).map_err(RecordsError::Io)?;
    }
    text[..complete_len]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| RecordsError::Parse(e.to_string())))
        .collect()
}

/// Reads the records of a run folder's `runs.jsonl` at `runs_path` (see [`load_jsonl`]).
pub fn read_records<R: DeserializeOwned>(runs_path: &Path) -> Result<Vec<R>, RunFolderError> {
    load_jsonl(runs_path).map_err(|e| match e {
        RecordsError::Io(e) => io(runs_path)(e),
        RecordsError::Parse(message) => RunFolderError::Unreadable {
            path: runs_path.display().to_string(),
            message: format!("unreadable record: {message}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    /// A plan whose model must match and whose sizes may grow on resume.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct TestPlan {
        model: String,
        runs: usize,
        sizes: Vec<usize>,
    }

    impl ResumablePlan for TestPlan {
        fn differences(&self, resumed: &Self) -> Vec<String> {
            [
                ("model", self.model == resumed.model),
                ("runs", self.runs == resumed.runs),
            ]
            .into_iter()
            .filter(|(_, same)| !same)
            .map(|(name, _)| name.to_string())
            .collect()
        }

        fn merged(&self, resumed: &Self) -> Self {
            let mut sizes = self.sizes.clone();
            sizes.extend(resumed.sizes.iter().filter(|s| !self.sizes.contains(s)));
            TestPlan {
                sizes,
                ..self.clone()
            }
        }
    }

    /// A plan that never grows: the default `merged`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct FixedPlan {
        model: String,
    }

    impl ResumablePlan for FixedPlan {
        fn differences(&self, resumed: &Self) -> Vec<String> {
            if self.model == resumed.model {
                Vec::new()
            } else {
                vec!["model".into()]
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Record {
        run: usize,
    }

    fn plan(model: &str, runs: usize, sizes: &[usize]) -> TestPlan {
        TestPlan {
            model: model.into(),
            runs,
            sizes: sizes.to_vec(),
        }
    }

    /// A folder started with `plan(m, 1, [10])` holding runs 0 and 1.
    fn started(dir: &Path) -> RunFolder {
        let folder = RunFolder::new(dir.join("out"));
        let none: Vec<Record> = folder.open(&plan("m", 1, &[10]), false).unwrap();
        assert!(none.is_empty());
        let mut out = folder.appender().unwrap();
        for run in 0..2 {
            out.append(&Record { run }).unwrap();
        }
        folder
    }

    #[test]
    fn starting_over_a_folder_that_holds_a_plan_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = started(dir.path());
        let again = folder.open::<_, Record>(&plan("m", 1, &[10]), false);
        assert!(
            matches!(again, Err(RunFolderError::Exists { .. })),
            "{again:?}"
        );
        assert_eq!(
            read_records::<Record>(&folder.runs_path()).unwrap().len(),
            2
        );
    }

    #[test]
    fn resuming_with_another_plan_is_refused_naming_each_difference() {
        let cases: &[(TestPlan, &str)] = &[
            (plan("other", 1, &[10]), "model"),
            (plan("m", 3, &[10]), "runs"),
            (plan("other", 3, &[10, 50]), "model, runs"),
        ];
        for (resumed, named) in cases {
            let dir = tempfile::tempdir().unwrap();
            let folder = started(dir.path());
            let before = std::fs::read_to_string(folder.plan_path()).unwrap();
            let err = folder.open::<_, Record>(resumed, true).unwrap_err();
            match &err {
                RunFolderError::Mismatch { differences, .. } => {
                    assert_eq!(differences.join(", "), *named);
                }
                other => panic!("{resumed:?}: {other:?}"),
            }
            assert!(
                err.to_string()
                    .contains(&format!("started with different settings ({named})")),
                "{err}"
            );
            // The refused resume changed nothing.
            assert_eq!(std::fs::read_to_string(folder.plan_path()).unwrap(), before);
        }
    }

    #[test]
    fn a_resume_returns_the_runs_already_done_so_none_runs_twice() {
        let dir = tempfile::tempdir().unwrap();
        let folder = started(dir.path());
        let done: Vec<Record> = folder.open(&plan("m", 1, &[10]), true).unwrap();
        assert_eq!(done, vec![Record { run: 0 }, Record { run: 1 }]);
    }

    #[test]
    fn a_resume_that_grows_the_plan_records_the_growth_and_a_fixed_plan_is_never_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let folder = started(dir.path());
        let _: Vec<Record> = folder.open(&plan("m", 1, &[50]), true).unwrap();
        let on_disk: TestPlan =
            serde_json::from_str(&std::fs::read_to_string(folder.plan_path()).unwrap()).unwrap();
        assert_eq!(on_disk, plan("m", 1, &[10, 50]));

        let fixed = RunFolder::new(dir.path().join("fixed"));
        let _: Vec<Record> = fixed.open(&FixedPlan { model: "m".into() }, false).unwrap();
        // Overwritten by hand with the same plan in another layout: a resume keeps the bytes.
        std::fs::write(fixed.plan_path(), r#"{"model":"m"}"#).unwrap();
        let _: Vec<Record> = fixed.open(&FixedPlan { model: "m".into() }, true).unwrap();
        assert_eq!(
            std::fs::read_to_string(fixed.plan_path()).unwrap(),
            r#"{"model":"m"}"#
        );
    }

    #[test]
    fn resuming_a_folder_that_was_never_started_starts_it() {
        let dir = tempfile::tempdir().unwrap();
        let folder = RunFolder::new(dir.path().join("new"));
        let none: Vec<Record> = folder.open(&plan("m", 1, &[10]), true).unwrap();
        assert!(none.is_empty());
        assert!(folder.plan_path().exists());
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_the_next_run_starts_on_a_fresh_line() {
        // (file as a kill left it, records read, file afterwards)
        let cases: &[(&str, &[usize], &str)] = &[
            ("", &[], ""),
            ("{\"run\":0}\n", &[0], "{\"run\":0}\n"),
            ("{\"run\":0}\n{\"ru", &[0], "{\"run\":0}\n"),
            (
                "{\"run\":0}\n\n{\"run\":1}\n",
                &[0, 1],
                "{\"run\":0}\n\n{\"run\":1}\n",
            ),
            ("{\"ru", &[], ""),
        ];
        for (before, runs, after) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(RUNS_FILE);
            std::fs::write(&path, before).unwrap();
            let records: Vec<Record> = read_records(&path).unwrap();
            let read: Vec<usize> = records.iter().map(|r| r.run).collect();
            assert_eq!(read, *runs, "{before:?}");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                *after,
                "{before:?}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = started(dir.path());
        let mut torn = OpenOptions::new()
            .append(true)
            .open(folder.runs_path())
            .unwrap();
        write!(torn, "{{\"run\":").unwrap();
        let done: Vec<Record> = folder.open(&plan("m", 1, &[10]), true).unwrap();
        assert_eq!(done.len(), 2);
        folder
            .appender()
            .unwrap()
            .append(&Record { run: 2 })
            .unwrap();
        let all: Vec<Record> = read_records(&folder.runs_path()).unwrap();
        assert_eq!(all.last(), Some(&Record { run: 2 }));
        assert_eq!(all.len(), 3);
    }

    #[test]
    fn a_complete_line_that_is_not_a_record_is_refused_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RUNS_FILE);
        std::fs::write(&path, "{\"run\":0}\n{\"walk\":1}\n").unwrap();
        let err = read_records::<Record>(&path).unwrap_err();
        assert!(
            matches!(&err, RunFolderError::Unreadable { message, .. } if message.starts_with("unreadable record: ")),
            "{err:?}"
        );
        assert!(
            err.to_string().starts_with(&path.display().to_string()),
            "{err}"
        );

        let folder = RunFolder::new(dir.path().join("bad-plan"));
        std::fs::create_dir_all(dir.path().join("bad-plan")).unwrap();
        std::fs::write(folder.plan_path(), "{\"model\":").unwrap();
        let err = folder
            .open::<_, Record>(&plan("m", 1, &[10]), true)
            .unwrap_err();
        assert!(matches!(err, RunFolderError::Unreadable { .. }), "{err:?}");
    }

    #[test]
    fn each_appended_run_is_on_disk_before_append_returns() {
        let dir = tempfile::tempdir().unwrap();
        let folder = started(dir.path());
        let mut out = folder.appender().unwrap();
        out.append(&Record { run: 7 }).unwrap();
        // Read while the appender is still open: nothing waits in a buffer.
        let text = std::fs::read_to_string(folder.runs_path()).unwrap();
        assert_eq!(text, "{\"run\":0}\n{\"run\":1}\n{\"run\":7}\n");
        drop(out);
    }
}
