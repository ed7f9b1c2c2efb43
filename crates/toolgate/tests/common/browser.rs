//! A real browser for page tests: Debian's headless `chromium`, driven by the pinned npm
//! `playwright-core` through `tests/browser/page.mjs` under the Node 22 that `scripts/setup.sh`
//! installs. A test opens a `file://` page or a server on 127.0.0.1, optionally presses keys
//! (keyboard use), and reads back what a person would see and what ran: the title, the text of
//! selectors and whether it is visible, values of expressions evaluated in the page, console
//! messages, page errors (uncaught exceptions), dialogs (alert, confirm, prompt: recorded and
//! dismissed), and requests that left this machine (aborted). Include it with
//! `#[path = "common/browser.rs"] mod browser;`.
//!
//! Bounded: the script gives up after [`PAGE_LIMIT`] and is killed a little later; it exits
//! when its stdin closes (the test process is gone). A missing chromium, Node or
//! playwright-core is a failure naming `scripts/setup.sh`, never a skipped test.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

#[path = "node.rs"]
mod node_install;
use node_install::{installed, node, node_dir, wait_bounded};

/// How long one page may take, launch to report (a page loads in about two seconds here).
pub const PAGE_LIMIT: Duration = Duration::from_secs(30);

/// Debian's chromium binary (`$TOOLGATE_CHROMIUM` to use another): the program itself, not the
/// `/usr/bin/chromium` shell wrapper, whose flag files are the machine's, not the test's.
pub fn chromium() -> PathBuf {
    chromium_at(std::env::var_os("TOOLGATE_CHROMIUM"))
}

/// The chromium binary at `configured` (unset or empty: Debian's), which must exist: else a
/// failure naming `scripts/setup.sh`.
pub fn chromium_at(configured: Option<std::ffi::OsString>) -> PathBuf {
    let path = configured.filter(|v| !v.is_empty()).map_or_else(
        || PathBuf::from("/usr/lib/chromium/chromium"),
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "chromium is not installed at {}: run scripts/setup.sh (it installs Debian's chromium \
         package and the pinned playwright-core that drives it; set TOOLGATE_CHROMIUM to use \
         another binary)",
        path.display()
    );
    path
}

/// The page script, after checking playwright-core is installed.
pub fn page_script() -> PathBuf {
    installed(
        node_dir().join("node_modules/playwright-core/package.json"),
        "playwright-core (npm), which drives chromium in the page tests,",
    );
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/page.mjs")
}

/// A `file://` URL for a local file.
pub fn file_url(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).expect("the page file exists");
    format!("file://{}", absolute.display())
}

/// One match of a selector.
#[derive(Debug, Clone, Deserialize)]
pub struct Shown {
    /// Its rendered text (`innerText`): what a person reads, without markup.
    pub text: String,
    pub visible: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ConsoleMessage {
    /// `log`, `error`, `warning`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Dialog {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// What the browser saw and what ran on the page.
#[derive(Debug, Clone, Deserialize)]
pub struct PageReport {
    pub title: Option<String>,
    pub url: Option<String>,
    /// Per requested selector, every match (at most 100) in document order.
    pub texts: BTreeMap<String, Vec<Shown>>,
    /// Per requested expression, its value; `"undefined"` for undefined.
    pub evals: BTreeMap<String, Value>,
    pub console: Vec<ConsoleMessage>,
    pub page_errors: Vec<String>,
    pub dialogs: Vec<Dialog>,
    /// Requests to anywhere but this machine, aborted.
    pub blocked: Vec<String>,
    /// Why loading or a step failed, if it did.
    pub error: Option<String>,
}

impl PageReport {
    /// The matches of `selector`, which must have been requested with [`Page::text`].
    pub fn texts(&self, selector: &str) -> &[Shown] {
        self.texts
            .get(selector)
            .unwrap_or_else(|| panic!("{selector} was not requested with Page::text"))
    }

    /// The value of `expression`, which must have been requested with [`Page::eval`].
    pub fn eval(&self, expression: &str) -> &Value {
        self.evals
            .get(expression)
            .unwrap_or_else(|| panic!("{expression} was not requested with Page::eval"))
    }

    /// Console messages of type `error`.
    pub fn console_errors(&self) -> Vec<&ConsoleMessage> {
        self.console.iter().filter(|m| m.kind == "error").collect()
    }
}

/// What to open and read; [`Page::open`] runs it.
#[derive(Debug, Clone, Default)]
pub struct Page {
    url: String,
    texts: Vec<String>,
    evals: Vec<String>,
    presses: Vec<(String, String)>,
    screenshot: Option<PathBuf>,
}

impl Page {
    pub fn new(url: impl Into<String>) -> Page {
        Page {
            url: url.into(),
            ..Page::default()
        }
    }

    /// Read the text of every match of a CSS selector (or Playwright selector).
    pub fn text(mut self, selector: &str) -> Page {
        self.texts.push(selector.to_owned());
        self
    }

    /// Evaluate a JavaScript expression in the page after the steps.
    pub fn eval(mut self, expression: &str) -> Page {
        self.evals.push(expression.to_owned());
        self
    }

    /// Focus the first match of `selector` and press `key` (Playwright key names: `Enter`,
    /// `Space`, `Tab`), before anything is read.
    pub fn press(mut self, selector: &str, key: &str) -> Page {
        self.presses.push((selector.to_owned(), key.to_owned()));
        self
    }

    /// Save a full-page PNG screenshot to `path`.
    pub fn screenshot(mut self, path: &Path) -> Page {
        self.screenshot = Some(path.to_owned());
        self
    }

    /// Opens the page; panics if the browser could not start, load the page or run a step,
    /// with what the script reported.
    pub fn open(self) -> PageReport {
        let (report, stderr) = self.run();
        if let Some(error) = &report.error {
            panic!(
                "the page {} failed in chromium: {error}\nstderr:\n{stderr}",
                self.url
            );
        }
        report
    }

    /// Opens the page and returns the report even when loading or a step failed.
    pub fn run(&self) -> (PageReport, String) {
        let mut command = Command::new(node());
        command
            .arg(page_script())
            .arg("--node-dir")
            .arg(node_dir())
            .arg("--chromium")
            .arg(chromium())
            .arg("--url")
            .arg(&self.url)
            .arg("--max-seconds")
            .arg(PAGE_LIMIT.as_secs().to_string());
        for selector in &self.texts {
            command.arg("--text").arg(selector);
        }
        for expression in &self.evals {
            command.arg("--eval").arg(expression);
        }
        for (selector, key) in &self.presses {
            command.arg("--press").arg(format!("{selector}::{key}"));
        }
        if let Some(path) = &self.screenshot {
            command.arg("--screenshot").arg(path);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node starts page.mjs");
        // Held open until the report is read: the script exits when its stdin closes.
        let stdin = child.stdin.take();
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        let status = wait_bounded(&mut child, PAGE_LIMIT + Duration::from_secs(10), "page.mjs");
        drop(stdin);
        let stdout = stdout.join().unwrap();
        let stderr = stderr.join().unwrap();
        let line = stdout.lines().last().unwrap_or_default();
        let report: PageReport = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "page.mjs ({status}) printed no report for {} ({e}); stdout:\n{stdout}\nstderr:\n{stderr}",
                self.url
            )
        });
        (report, stderr)
    }
}
