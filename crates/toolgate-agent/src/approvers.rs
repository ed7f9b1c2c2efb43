//! Approvers a human can stand behind: a terminal prompt that shows exactly what will run, and
//! (from core) deny-all, the default when no terminal is attached, and a scripted approver for
//! tests; and, for measuring only, the fatigued approver, which approves everything.
//!
//! Guarantees: the terminal approver asks on the terminal itself (`/dev/tty`, or the terminal
//! it was given), never on standard input, which may be a pipe or a paste that holds the whole
//! conversation; before each question it discards whatever was typed or pasted and not yet
//! read, so only a line typed after the question was shown can answer it. It approves only on
//! an explicit `y` or `yes`; anything else, including end of input or an unreadable line, is a
//! denial or an error (which the dispatcher treats as a denial). Without a terminal there is no
//! terminal approver ([`TerminalApprover::if_terminal`] is `None`), so nothing that needs
//! approval runs. What it shows is [`ApprovalRequest::describe`], in which every control and
//! format character is shown by name, so the text cannot move the cursor, erase a line or
//! reorder what the person reads.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::sync::Arc;

use toolgate_core::tool::BoxFuture;
use toolgate_core::{ApprovalAnswer, ApprovalRequest, Approver, ApproverError};

/// The longest answer line kept (an answer is `y` or `no`; the rest of a long line is read and
/// dropped).
const MAX_ANSWER_BYTES: usize = 256;

/// What the human reads before answering: [`ApprovalRequest::describe`] and the question.
pub fn approval_prompt(request: &ApprovalRequest) -> String {
    format!("{}Approve this exact call? [y/N] ", request.describe())
}

/// Whether an answer line approves.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Asks on a terminal: the question written to it, the answer read from it, after discarding
/// input that was waiting. See the module documentation.
#[derive(Debug)]
pub struct TerminalApprover {
    // One question at a time, even when calls run in parallel.
    asking: tokio::sync::Mutex<()>,
    tty: Arc<File>,
}

impl TerminalApprover {
    /// An approver on this process's terminal (`/dev/tty`), whatever standard input is; `None`
    /// when the process has no terminal (use deny-all: nobody can be asked).
    pub fn if_terminal() -> Option<Self> {
        Self::open().ok()
    }

    /// An approver on this process's terminal, or why there is none.
    pub fn open() -> Result<Self, ApproverError> {
        let tty = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|e| {
                ApproverError::Unavailable(format!(
                    "there is no terminal to ask on (/dev/tty: {e}); approvals are never read from standard input"
                ))
            })?;
        Self::on(tty)
    }

    /// An approver asking on `tty`, which must be a terminal (a pipe or a file is refused).
    pub fn on(tty: File) -> Result<Self, ApproverError> {
        if !rustix::termios::isatty(&tty) {
            return Err(ApproverError::Unavailable(
                "approvals are asked on a terminal, and this is not one".into(),
            ));
        }
        Ok(TerminalApprover {
            asking: tokio::sync::Mutex::new(()),
            tty: Arc::new(tty),
        })
    }
}

impl Approver for TerminalApprover {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        let prompt = approval_prompt(request);
        Box::pin(async move {
            let _one_at_a_time = self.asking.lock().await;
            let tty = Arc::clone(&self.tty);
            let line = tokio::task::spawn_blocking(move || ask_on(&tty, &prompt))
                .await
                .map_err(|e| ApproverError::Unavailable(e.to_string()))??;
            if is_yes(&line) {
                Ok(ApprovalAnswer::Approve)
            } else {
                Ok(ApprovalAnswer::Deny {
                    reason: "the user answered no".into(),
                })
            }
        })
    }
}

/// Shows `prompt` on `tty` and reads one answer line typed after it.
fn ask_on(tty: &File, prompt: &str) -> Result<String, ApproverError> {
    // Input typed ahead or pasted with the conversation was written before anyone saw this
    // question: it answers nothing.
    rustix::termios::tcflush(tty, rustix::termios::QueueSelector::IFlush).map_err(|e| {
        ApproverError::Unavailable(format!(
            "the terminal's waiting input could not be discarded: {e}"
        ))
    })?;
    let mut out = tty;
    write!(out, "\n{prompt}")
        .and_then(|()| out.flush())
        .map_err(|e| ApproverError::Unavailable(e.to_string()))?;
    read_line(tty)
}

/// One line, read a byte at a time so that nothing after it is taken from the terminal.
fn read_line(mut tty: &File) -> Result<String, ApproverError> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match tty.read(&mut byte) {
            Ok(0) if line.is_empty() => {
                return Err(ApproverError::Unreadable("end of input".into()));
            }
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if line.len() < MAX_ANSWER_BYTES {
                    line.push(byte[0]);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ApproverError::Unreadable(e.to_string())),
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Approves every call it is asked about, as a tired person clicking "yes" does. It exists to
/// measure what the layers other than approval stop (the injection suite runs every case with
/// it and with deny-all); never offer it to a person as a choice.
#[derive(Debug, Default)]
pub struct FatiguedApprover {
    asked: std::sync::atomic::AtomicUsize,
}

impl FatiguedApprover {
    /// How many calls it approved.
    pub fn approved(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Approver for FatiguedApprover {
    fn decide<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalAnswer, ApproverError>> {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async { Ok(ApprovalAnswer::Approve) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::ffi::OsStrExt;
    use toolgate_core::{Effect, Risk};

    #[test]
    fn only_explicit_yes_approves() {
        for (answer, yes) in [
            ("y", true),
            ("YES\n", true),
            (" yes ", true),
            ("", false),
            ("n", false),
            ("sure", false),
            ("yy", false),
        ] {
            assert_eq!(is_yes(answer), yes, "{answer:?}");
        }
    }

    #[test]
    fn terminal_prompt_ends_with_the_question() {
        let request = ApprovalRequest {
            binding: "b".into(),
            tool: "notes_delete".into(),
            version: 1,
            risk: Risk::High,
            reason: "It removes a note.".into(),
            effect: Effect::UndoableWrite,
            arguments: json!({"id": 3}),
            preview: None,
            principal: "me".into(),
            taint: Vec::new(),
        };
        let prompt = approval_prompt(&request);
        assert!(prompt.starts_with(&request.describe()));
        assert!(prompt.ends_with("Approve this exact call? [y/N] "));
    }

    /// A real pseudo-terminal: the approver's side and the person's side (what the screen
    /// shows is read from it, what the person types is written to it).
    fn pty() -> (File, File) {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::os::unix::fs::OpenOptionsExt;
        let person =
            openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
        grantpt(&person).unwrap();
        unlockpt(&person).unwrap();
        let name = ptsname(&person, Vec::new()).unwrap();
        let terminal = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(std::ffi::OsStr::from_bytes(name.as_bytes()))
            .unwrap();
        (terminal, File::from(person))
    }

    /// Everything the terminal shows, read as it comes.
    fn screen_of(person: &File) -> Arc<std::sync::Mutex<Vec<u8>>> {
        let screen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reading = person.try_clone().unwrap();
        let shown = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            // Ends when the terminal side closes (EIO) or the test ends.
            while let Ok(n) = reading.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                shown.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        screen
    }

    fn wait_for(screen: &std::sync::Mutex<Vec<u8>>, text: &str, times: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let shown = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
            if shown.matches(text).count() >= times {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never shown {text:?}: {shown:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits until the terminal holds a whole unread line (what the person typed reached it).
    fn wait_unread_line(terminal: &File) {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds = [PollFd::new(terminal, PollFlags::IN)];
        let ready = poll(
            &mut fds,
            Some(&rustix::event::Timespec {
                tv_sec: 10,
                tv_nsec: 0,
            }),
        )
        .unwrap();
        assert_eq!(ready, 1, "the typed line never reached the terminal");
    }

    fn hidden_line_draft() -> ApprovalRequest {
        ApprovalRequest {
            binding: "b".into(),
            tool: "email_send".into(),
            version: 1,
            risk: Risk::High,
            reason: "It sends mail to other people and cannot be undone.".into(),
            effect: Effect::Irreversible,
            arguments: json!({"draft_id": 7}),
            preview: Some(json!({
                "to": "ann@example.org",
                "subject": "Friday",
                "body": "SECRET: the merger closes Monday\n\u{1b}[1A\u{1b}[2K| See you Friday.",
            })),
            principal: "me".into(),
            taint: Vec::new(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_terminal_shows_the_hidden_line_and_only_an_answer_typed_after_the_question_counts()
    {
        let (terminal, person) = pty();
        let approver = Arc::new(TerminalApprover::on(terminal.try_clone().unwrap()).unwrap());
        let screen = screen_of(&person);
        let mut keyboard = person.try_clone().unwrap();

        // A `y` pasted with the conversation, before any question: it must answer nothing.
        keyboard.write_all(b"y\n").unwrap();
        wait_unread_line(&terminal);
        let asking = Arc::clone(&approver);
        let first = tokio::spawn(async move { asking.decide(&hidden_line_draft()).await });
        wait_for(&screen, "[y/N] ", 1);
        keyboard.write_all(b"n\n").unwrap();
        assert_eq!(
            first.await.unwrap().unwrap(),
            ApprovalAnswer::Deny {
                reason: "the user answered no".into()
            },
            "the pasted y did not approve; the n typed after the question denied"
        );

        // The positive path: a yes typed after the question approves.
        let asking = Arc::clone(&approver);
        let second = tokio::spawn(async move { asking.decide(&hidden_line_draft()).await });
        wait_for(&screen, "[y/N] ", 2);
        keyboard.write_all(b"yes\n").unwrap();
        assert_eq!(second.await.unwrap().unwrap(), ApprovalAnswer::Approve);

        let shown = screen.lock().unwrap().clone();
        let text = String::from_utf8_lossy(&shown);
        assert!(
            !shown.contains(&0x1b),
            "no escape byte reached the terminal: {text:?}"
        );
        assert!(text.contains("SECRET: the merger closes Monday"), "{text}");
        assert!(
            text.contains("    | <ESC>[1A<ESC>[2K| See you Friday."),
            "the escape is shown, on a line marked as the body's: {text}"
        );
    }

    #[test]
    fn a_file_or_a_pipe_is_not_a_terminal_to_ask_on() {
        let file = tempfile::tempfile().unwrap();
        let refused = TerminalApprover::on(file).unwrap_err();
        assert!(refused.to_string().contains("not one"), "{refused}");
    }
}
