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
//!
//! It also puts an MCP server's question to the person (its elicitation,
//! [`crate::server_questions`]): one question at a time with approvals, each prompt after the
//! same discarding of waiting input, each answer one line; an answer line longer than the
//! terminal keeps is refused rather than cut short.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::sync::Arc;

use toolgate_core::tool::BoxFuture;
use toolgate_core::{
    ApprovalAnswer, ApprovalRequest, Approver, ApproverError, QuestionAnswer, QuestionRefused,
    ServerQuestion,
};

use crate::server_questions::{Conversation, Interview, Typed};

/// The longest answer line kept (an answer is `y` or `no`; the rest of a long line is read and
/// dropped).
const MAX_ANSWER_BYTES: usize = 256;

/// The longest line kept as a server's form answer; a longer one is refused, never cut short.
const MAX_FORM_ANSWER_BYTES: usize = 16 * 1024;

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

    fn ask<'a>(
        &'a self,
        question: &'a ServerQuestion,
    ) -> BoxFuture<'a, Result<QuestionAnswer, QuestionRefused>> {
        Box::pin(async move {
            // A form that cannot be shown whole is refused before the person is disturbed.
            let interview = Interview::of(question)?;
            let _one_at_a_time = self.asking.lock().await;
            let tty = Arc::clone(&self.tty);
            tokio::task::spawn_blocking(move || interview.run(&mut OnTerminal { tty: &tty }))
                .await
                .map_err(|e| QuestionRefused::Unavailable(e.to_string()))?
        })
    }
}

/// A server's question asked on the terminal: each prompt as an approval's is.
struct OnTerminal<'a> {
    tty: &'a File,
}

impl Conversation for OnTerminal<'_> {
    fn ask(&mut self, prompt: &str) -> Result<Typed, QuestionRefused> {
        let (line, cut) =
            ask_keeping(self.tty, prompt, MAX_FORM_ANSWER_BYTES).map_err(unavailable)?;
        Ok(if cut {
            Typed::TooLong {
                limit: MAX_FORM_ANSWER_BYTES,
            }
        } else {
            Typed::Line(line)
        })
    }

    fn tell(&mut self, text: &str) -> Result<(), QuestionRefused> {
        let mut out = self.tty;
        writeln!(out, "\n{text}")
            .and_then(|()| out.flush())
            .map_err(|e| QuestionRefused::Unavailable(e.to_string()))
    }
}

/// End of input or an unreadable terminal: nobody can answer the server's question here.
fn unavailable(e: ApproverError) -> QuestionRefused {
    match e {
        ApproverError::Unreadable(detail) | ApproverError::Unavailable(detail) => {
            QuestionRefused::Unavailable(format!("the terminal: {detail}"))
        }
    }
}

/// Shows `prompt` on `tty` and reads one answer line typed after it.
fn ask_on(tty: &File, prompt: &str) -> Result<String, ApproverError> {
    ask_keeping(tty, prompt, MAX_ANSWER_BYTES).map(|(line, _cut)| line)
}

/// As [`ask_on`], keeping at most `limit` bytes of the line, and whether more were typed.
fn ask_keeping(tty: &File, prompt: &str, limit: usize) -> Result<(String, bool), ApproverError> {
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
    read_line(tty, limit)
}

/// One line, read a byte at a time so that nothing after it is taken from the terminal; at
/// most `limit` bytes kept, and whether more were dropped.
fn read_line(mut tty: &File, limit: usize) -> Result<(String, bool), ApproverError> {
    let mut line = Vec::new();
    let mut cut = false;
    let mut byte = [0u8; 1];
    loop {
        match tty.read(&mut byte) {
            Ok(0) if line.is_empty() => {
                return Err(ApproverError::Unreadable("end of input".into()));
            }
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if line.len() < limit {
                    line.push(byte[0]);
                } else {
                    cut = true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ApproverError::Unreadable(e.to_string())),
        }
    }
    Ok((String::from_utf8_lossy(&line).into_owned(), cut))
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
#[path = "approvers_tests.rs"]
mod tests;
