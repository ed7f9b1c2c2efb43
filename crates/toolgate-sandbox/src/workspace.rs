//! Working folders, one per conversation (run id): a later script in the same conversation
//! reads what an earlier one wrote; another conversation never sees it. All of them live under
//! one private root that is removed when the [`Workspaces`] is dropped (the end of the
//! conversation for `toolgate ask`), and [`Workspaces::finish`] removes one conversation's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::error::SandboxError;

#[derive(Debug)]
pub struct Workspaces {
    root: tempfile::TempDir,
    runs: Mutex<HashMap<String, PathBuf>>,
}

impl Workspaces {
    pub fn new() -> Result<Self, SandboxError> {
        let root = tempfile::Builder::new()
            .prefix("toolgate-work-")
            .tempdir()
            .map_err(|e| SandboxError::io(std::env::temp_dir(), e))?;
        // Traversable (not listable) by the sandbox's user when toolgate runs as root.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o711))
            .map_err(|e| SandboxError::io(root.path(), e))?;
        Ok(Workspaces {
            root,
            runs: Mutex::new(HashMap::new()),
        })
    }

    /// The conversation's folder, made on first use.
    pub fn for_run(&self, run_id: &str) -> Result<PathBuf, SandboxError> {
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| SandboxError::Config("the workspace table is poisoned".to_owned()))?;
        if let Some(dir) = runs.get(run_id) {
            return Ok(dir.clone());
        }
        // Numbered, not named after the run id: a run id is caller text.
        let dir = self.root.path().join(format!("run-{}", runs.len() + 1));
        std::fs::create_dir(&dir).map_err(|e| SandboxError::io(&dir, e))?;
        // The root lets anyone traverse it: the folder itself is private to the run.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| SandboxError::io(&dir, e))?;
        runs.insert(run_id.to_owned(), dir.clone());
        Ok(dir)
    }

    /// Removes the conversation's folder (a later script in the same run starts empty).
    pub fn finish(&self, run_id: &str) -> Result<(), SandboxError> {
        let removed = match self.runs.lock() {
            Ok(mut runs) => runs.remove(run_id),
            Err(_) => None,
        };
        match removed {
            Some(dir) => std::fs::remove_dir_all(&dir).map_err(|e| SandboxError::io(&dir, e)),
            None => Ok(()),
        }
    }

    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_keeps_its_folder_and_another_gets_its_own() {
        let spaces = Workspaces::new().unwrap();
        let a = spaces.for_run("run-a").unwrap();
        std::fs::write(a.join("state.txt"), "kept").unwrap();
        assert_eq!(spaces.for_run("run-a").unwrap(), a);
        let b = spaces.for_run("run-b").unwrap();
        assert_ne!(a, b);
        assert_eq!(std::fs::read_dir(&b).unwrap().count(), 0);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "a conversation's folder is private to it");
    }

    #[test]
    fn finishing_a_conversation_removes_its_folder_and_dropping_removes_them_all() {
        let spaces = Workspaces::new().unwrap();
        let a = spaces.for_run("run-a").unwrap();
        let b = spaces.for_run("run-b").unwrap();
        spaces.finish("run-a").unwrap();
        assert!(!a.exists() && b.exists());
        let root = spaces.root().to_owned();
        drop(spaces);
        assert!(!root.exists() && !b.exists());
    }

    #[test]
    fn a_run_id_never_names_a_path() {
        let spaces = Workspaces::new().unwrap();
        let dir = spaces.for_run("../../etc").unwrap();
        assert_eq!(dir.parent(), Some(spaces.root()));
    }
}
