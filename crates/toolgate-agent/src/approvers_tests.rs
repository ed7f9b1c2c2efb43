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
    let person = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
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
async fn the_terminal_shows_the_hidden_line_and_only_an_answer_typed_after_the_question_counts() {
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

/// A server's form, answered field by field on a real terminal: a required field left empty
/// and a fraction for an integer asked again, a choice picked by its title, a default kept, the
/// answers confirmed; no escape byte of the server's reaches the screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_form_is_answered_on_a_real_terminal() {
    use toolgate_core::{Asked, QuestionAnswer, ServerQuestion};

    let (terminal, person) = pty();
    let approver = Arc::new(TerminalApprover::on(terminal.try_clone().unwrap()).unwrap());
    let screen = screen_of(&person);
    // Each line is typed after its prompt was shown.
    let wait_for = |text: &str, times: usize| wait_for(&screen, text, times);
    let question = ServerQuestion {
        server: "crm".into(),
        message: "Who\u{1b}[2J should we contact?".into(),
        asked: Asked::Form {
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name\u{1b}[8m"},
                    "age": {"type": "integer", "minimum": 0},
                    "color": {"type": "string", "oneOf": [
                        {"const": "r", "title": "Red"},
                        {"const": "g", "title": "Green"},
                        {"const": "b", "title": "Blue"},
                    ]},
                    "news": {"type": "boolean", "default": true},
                },
                "required": ["name", "age"],
            }),
        },
    };
    let asking = Arc::clone(&approver);
    let answer = tokio::spawn(async move { asking.ask(&question).await });
    let mut keyboard = person.try_clone().unwrap();
    wait_for("c = cancel] ", 1);
    let mut prompts = 0;
    for line in ["y", "", "Ann", "41.5", "41", "Green", ""] {
        keyboard.write_all(format!("{line}\n").as_bytes()).unwrap();
        prompts += 1;
        if prompts < 7 {
            wait_for("\n> ", prompts);
        }
    }
    wait_for("[y/N] ", 1);
    keyboard.write_all(b"y\n").unwrap();
    assert_eq!(
        answer.await.unwrap(),
        Ok(QuestionAnswer::Accept(
            json!({"name": "Ann", "age": 41, "color": "g", "news": true})
                .as_object()
                .unwrap()
                .clone()
        ))
    );
    let shown = screen.lock().unwrap().clone();
    let text = String::from_utf8_lossy(&shown);
    assert!(
        !shown.contains(&0x1b),
        "no escape byte reached the terminal: {text:?}"
    );
    assert!(text.contains("Who<ESC>[2J should we contact?"), "{text}");
    assert!(
        text.contains("Not taken (try 1 of 3): this field is required"),
        "{text}"
    );
    assert!(text.contains("`41.5` is not a whole number"), "{text}");
    assert!(
        text.contains("Send these answers to `crm`? [y/N] "),
        "{text}"
    );
}
