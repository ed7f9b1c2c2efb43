//! A notes store with a real SMTP server on 127.0.0.1 behind the SMTP exit: what the tests of
//! `email_send` through the loop share.

use toolgate_egress::EgressConfig;
use toolgate_wiring::{ExitsConfig, Store, StoreKind};

pub use super::mail_sink::MailSink;

pub struct NotesWithMail {
    pub dir: tempfile::TempDir,
    pub sink: MailSink,
    pub store: Store,
    pub exits: ExitsConfig,
}

impl NotesWithMail {
    /// The sample notebook, no allowed hosts, and the relay pointing at a fresh SMTP server.
    pub fn new() -> NotesWithMail {
        let sink = MailSink::start();
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open_or_init(StoreKind::Notes, &dir.path().join("notes.sqlite")).unwrap();
        let exits = ExitsConfig::new(EgressConfig::default(), None)
            .with_loopback_relay(sink.port(), "Notes Assistant <assistant@example.org>");
        NotesWithMail {
            dir,
            sink,
            store,
            exits,
        }
    }
}
