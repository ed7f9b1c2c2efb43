//! The audit console: the decision records the server keeps, searched, a call shown with the
//! calls made from inside it, and a search exported (`/console/audit`, `/console/audit/call`,
//! `/console/audit/export`); a call's page also shows a write's receipt as the store keeps it
//! (what was written, the key, when) and the egress exit's decisions on the requests its
//! handler made, and a gateway call's requests to its MCP server as leaves of the tree (with
//! the calls a toolgate server behind it dispatched for it, when both share the audit).
//! Read-only: these pages only answer GET and change nothing, so they
//! need no CSRF token; reading them needs a signed-in auditor ([`crate::rules::may_audit`]).
//!
//! Guarantees: a signed-out person is sent to sign in, a signed-in person who is not an auditor
//! gets 403 and no record; a search's filter is refused (400, the form kept as typed) when a
//! value is outside its closed form; pages go forward by keyset cursor; an export holds exactly
//! the rows the same search pages through, at most [`EXPORT_LIMIT`] (more is refused with 413
//! rather than cut short); every value shown is escaped by the templates and exports are sent
//! as attachments (`nosniff`), so a record's text never runs in the console's origin.

use bytes::Bytes;
use http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use minijinja::context;
use toolgate_store::audit::export::ExportWriter;
use toolgate_store::audit::query::MAX_PAGE;
use toolgate_store::audit::{AuditError, AuditStore, ExportFormat};

use crate::audit_views::{
    AuditLine, CallView, EgressView, PAGE_ROWS, ReceiptView, Search, SearchForm, approval_choices,
    outcome_choices, parse_search,
};
use crate::pages::{Templates, see_other};
use crate::rules::may_audit;
use crate::sessions::Session;
use crate::{Console, PREFIX};

/// The most rows one export from the console holds (`toolgate audit export` has no limit).
pub const EXPORT_LIMIT: usize = 100_000;

type Answer = Response<Full<Bytes>>;

impl Console {
    /// The auditor's session and the audit store, or the page that refuses.
    fn auditor<'a>(
        &'a self,
        session: Option<&'a (String, Session)>,
    ) -> Result<(&'a Session, &'a AuditStore), Answer> {
        let Some((_, session)) = session else {
            return Err(see_other(PREFIX));
        };
        if let Err(refusal) = may_audit(&session.principal, &self.settings.auditors) {
            return Err(self.templates.message(
                StatusCode::FORBIDDEN,
                "Not an auditor",
                &refusal.to_string(),
                self.signed_in(session),
            ));
        }
        match &self.audit {
            Some(store) => Ok((session, store)),
            None => Err(self.templates.message(
                StatusCode::SERVICE_UNAVAILABLE,
                "No audit here",
                "This server keeps no audit the console can read.",
                self.signed_in(session),
            )),
        }
    }

    fn audit_failed(&self, error: &AuditError, session: &Session) -> Answer {
        self.templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The audit could not be read",
            &error.to_string(),
            self.signed_in(session),
        )
    }

    /// `GET /console/audit?FILTERS[&after=CURSOR]`: the form and one page of what it finds.
    pub(crate) async fn audit_search(
        &self,
        query: &str,
        session: Option<&(String, Session)>,
    ) -> Answer {
        match self.auditor(session) {
            Ok((session, store)) => {
                search_page(
                    &self.templates,
                    store,
                    query,
                    &session.principal.id,
                    &session.csrf,
                )
                .await
            }
            Err(refused) => refused,
        }
    }

    /// `GET /console/audit/call?run=RUN&call=CALL`: the call, its nested calls as a tree.
    pub(crate) async fn audit_call(
        &self,
        query: &str,
        session: Option<&(String, Session)>,
    ) -> Answer {
        let (session, store) = match self.auditor(session) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        call_page(
            &self.templates,
            store,
            query,
            &session.principal.id,
            &session.csrf,
        )
        .await
    }

    /// `GET /console/audit/export?format=jsonl|csv&FILTERS`: every row of the search, as a
    /// download.
    pub(crate) async fn audit_export(
        &self,
        query: &str,
        session: Option<&(String, Session)>,
    ) -> Answer {
        let (session, store) = match self.auditor(session) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        let format = url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "format")
            .map(|(_, value)| value.parse::<ExportFormat>());
        let format = match format {
            Some(Ok(format)) => format,
            Some(Err(why)) => return self.bad_export(session, &why),
            None => return self.bad_export(session, "the link names no format: jsonl or csv"),
        };
        let search = match parse_search(query) {
            // An export is the whole search: a page cursor in its link is not a filter.
            Ok(search) => search,
            Err((_, refusal)) => return self.bad_export(session, &refusal.to_string()),
        };
        match export(store, &search, format).await {
            Ok(Some(bytes)) => download(format, bytes),
            Ok(None) => self.templates.message(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too many records",
                &format!(
                    "This search finds more than {EXPORT_LIMIT} records: narrow it (a time \
                     range, a principal), or export it with `toolgate audit export`."
                ),
                self.signed_in(session),
            ),
            Err(error) => self.audit_failed(&error, session),
        }
    }

    fn bad_export(&self, session: &Session, why: &str) -> Answer {
        self.templates.message(
            StatusCode::BAD_REQUEST,
            "Cannot export",
            why,
            self.signed_in(session),
        )
    }
}

/// The audit search page for `query` as `who` (an auditor, whose form token is `csrf`) sees
/// it: the form, one page of `store`'s rows, rendered. What `GET /console/audit` answers once
/// the session is checked.
pub async fn search_page(
    templates: &Templates,
    store: &AuditStore,
    query: &str,
    who: &str,
    csrf: &str,
) -> Answer {
    let Search {
        form,
        filter,
        after,
    } = match parse_search(query) {
        Ok(search) => search,
        Err((form, refusal)) => {
            return render_search(
                templates,
                StatusCode::BAD_REQUEST,
                (who, csrf),
                &form,
                Some(refusal.to_string()),
                None,
            );
        }
    };
    match store.search(&filter, after, PAGE_ROWS).await {
        Ok(page) => {
            let lines = page.entries.iter().map(AuditLine::of).collect();
            let next = page.next.map(|cursor| {
                form.link(
                    &format!("{PREFIX}/audit"),
                    &[("after", &cursor.to_string())],
                )
            });
            render_search(
                templates,
                StatusCode::OK,
                (who, csrf),
                &form,
                None,
                Some((lines, next)),
            )
        }
        Err(error) => templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The audit could not be read",
            &error.to_string(),
            Some((who, csrf)),
        ),
    }
}

/// The page of the call `query` names (`run=RUN&call=CALL`) with the calls made from it, as
/// `who` (an auditor, whose form token is `csrf`) sees it, rendered. What
/// `GET /console/audit/call` answers once the session is checked.
pub async fn call_page(
    templates: &Templates,
    store: &AuditStore,
    query: &str,
    who: &str,
    csrf: &str,
) -> Answer {
    let mut run = None;
    let mut call = None;
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "run" => run = Some(value.into_owned()),
            "call" => call = Some(value.into_owned()),
            _ => {}
        }
    }
    let Some(call) = call.filter(|c| !c.is_empty()) else {
        return templates.message(
            StatusCode::BAD_REQUEST,
            "Which call?",
            "The link names no call: open one from the audit's search.",
            Some((who, csrf)),
        );
    };
    match store.tree(&call, run.as_deref()).await {
        Ok(Some(tree)) => {
            let mut view = CallView::of(&tree);
            if !view.receipt.is_empty() {
                view.written = Some(ReceiptView::of(store.write_record(&view.receipt).await));
            }
            match store.egress(&view.call_id, &view.run_id).await {
                Ok(found) => view.egress = found.iter().map(EgressView::of).collect(),
                Err(error) => view.egress_error = error.to_string(),
            }
            // Each call's requests to an imported tool's server, under it in the tree. A tree
            // spans runs when a toolgate server behind a gateway recorded calls for it.
            let mut runs: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for entry in tree.entries() {
                runs.entry(entry.run_id.clone())
                    .or_default()
                    .push(entry.call_id.clone());
            }
            let mut legs = Vec::new();
            for (run, calls) in runs {
                match store.upstream_legs(&run, calls).await {
                    Ok(found) => legs.extend(found),
                    Err(error) => view.legs_error = error.to_string(),
                }
            }
            view.tree.hang_legs(&legs);
            templates.page(
                StatusCode::OK,
                "call.html",
                context! { c => view, who, csrf },
            )
        }
        Ok(None) => templates.message(
            StatusCode::NOT_FOUND,
            "No such call",
            "The audit holds no call with this id in this run.",
            Some((who, csrf)),
        ),
        Err(error) => templates.message(
            StatusCode::SERVICE_UNAVAILABLE,
            "The audit could not be read",
            &error.to_string(),
            Some((who, csrf)),
        ),
    }
}

fn render_search(
    templates: &Templates,
    status: StatusCode,
    (who, csrf): (&str, &str),
    form: &SearchForm,
    refusal: Option<String>,
    found: Option<(Vec<AuditLine>, Option<String>)>,
) -> Answer {
    let (lines, next) = found.unwrap_or_default();
    let searched = found_nothing(&lines, refusal.as_deref());
    templates.page(
        status,
        "audit.html",
        context! {
            form, refusal, lines, next, searched,
            outcomes => outcome_choices(),
            approvals => approval_choices(),
            jsonl => form.link(&format!("{PREFIX}/audit/export"), &[("format", "jsonl")]),
            csv => form.link(&format!("{PREFIX}/audit/export"), &[("format", "csv")]),
            who, csrf,
        },
    )
}

/// Whether the page should say the search found nothing (it ran, without a refusal).
fn found_nothing(lines: &[AuditLine], refusal: Option<&str>) -> bool {
    refusal.is_none() && lines.is_empty()
}

/// Every row of `search` (from its first page, whatever cursor it names) as `format`, newest
/// first; `None` when there are more than [`EXPORT_LIMIT`].
async fn export(
    store: &AuditStore,
    search: &Search,
    format: ExportFormat,
) -> Result<Option<Vec<u8>>, AuditError> {
    let mut writer = ExportWriter::new(format, Vec::new())?;
    let mut after = None;
    let mut written = 0;
    loop {
        let page = store.search(&search.filter, after, MAX_PAGE).await?;
        written += page.entries.len();
        if written > EXPORT_LIMIT {
            return Ok(None);
        }
        for entry in &page.entries {
            writer.write(entry)?;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(Some(writer.into_inner()?))
}

/// The export as a file to save, never a page to show.
fn download(format: ExportFormat, bytes: Vec<u8>) -> Answer {
    let (content_type, name) = match format {
        ExportFormat::Jsonl => ("application/jsonl; charset=utf-8", "audit.jsonl"),
        ExportFormat::Csv => ("text/csv; charset=utf-8", "audit.csv"),
    };
    let mut response = crate::pages::html_response(StatusCode::OK, String::new());
    *response.body_mut() = Full::new(Bytes::from(bytes));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(CONTENT_DISPOSITION, value);
    }
    response
}
