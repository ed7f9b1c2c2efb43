//! A search written out for people and their tools: JSON Lines (one [`AuditEntry`] per line,
//! the decision record whole) or CSV (one row per call, the columns a reviewer sorts by and the
//! arguments as JSON text).
//!
//! Why neutralising: arguments, principals and tool names are attacker-controlled text, and a
//! spreadsheet runs a cell that starts with `=`, `+`, `-`, `@` (or a tab or carriage return,
//! which some spreadsheets strip first) as a formula. Such a text cell is written with a
//! leading `'`, which spreadsheets show as text (OWASP's advice for CSV injection).
//!
//! Guarantees: CSV is RFC 4180 (the `csv` crate quotes every cell holding a comma, quote or line
//! break, and doubles quotes); no text cell starts with a formula character; every JSON line is
//! one complete JSON object. Refuses nothing: every row is written.

use std::io::Write;

use serde_json::Value;

use super::row::AuditEntry;
use super::store::AuditError;

/// The format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "jsonl" => Ok(ExportFormat::Jsonl),
            "csv" => Ok(ExportFormat::Csv),
            other => Err(format!("{other:?} is not an export format: jsonl or csv")),
        }
    }
}

/// The CSV header, in the order [`csv_record`] writes the cells.
pub const CSV_HEADER: [&str; 17] = [
    "id",
    "time_unix_ms",
    "time_utc",
    "instance",
    "run_id",
    "call_id",
    "parent_call_id",
    "tenant",
    "principal",
    "tool",
    "origin",
    "outcome",
    "approval",
    "denial",
    "decided_by",
    "risk",
    "arguments",
];

/// `text` safe to open in a spreadsheet: prefixed with `'` when it would start a formula.
pub fn neutralised(text: &str) -> std::borrow::Cow<'_, str> {
    match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}").into(),
        _ => text.into(),
    }
}

/// `time_unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, proleptic Gregorian).
pub fn utc_time(time_unix_ms: i64) -> String {
    let ms = time_unix_ms.rem_euclid(1000);
    let secs = time_unix_ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The CSV cells of `entry`, in [`CSV_HEADER`]'s order, text cells neutralised.
pub fn csv_record(entry: &AuditEntry) -> Vec<String> {
    let text = |s: &str| neutralised(s).into_owned();
    let optional = |s: &Option<String>| s.as_deref().map(text).unwrap_or_default();
    let record_text = |key: &str| match entry.record.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => text(s),
        Some(other) => text(&other.to_string()),
    };
    vec![
        entry.id.to_string(),
        entry.time_unix_ms.to_string(),
        utc_time(entry.time_unix_ms),
        text(&entry.instance),
        text(&entry.run_id),
        text(&entry.call_id),
        optional(&entry.parent_call_id),
        text(&entry.tenant),
        text(&entry.principal),
        text(&entry.tool),
        text(&entry.origin),
        text(&entry.outcome),
        text(&entry.approval),
        optional(&entry.denial),
        optional(&entry.decided_by),
        record_text("risk"),
        record_text("arguments"),
    ]
}

/// Writes entries one by one in a format.
pub enum ExportWriter<W: Write> {
    Jsonl(W),
    Csv(Box<csv::Writer<W>>),
}

impl<W: Write> ExportWriter<W> {
    /// A writer of `format` to `out` (the CSV header written at once).
    pub fn new(format: ExportFormat, out: W) -> Result<Self, AuditError> {
        Ok(match format {
            ExportFormat::Jsonl => ExportWriter::Jsonl(out),
            ExportFormat::Csv => {
                let mut writer = csv::WriterBuilder::new()
                    .quote_style(csv::QuoteStyle::Necessary)
                    .from_writer(out);
                writer.write_record(CSV_HEADER)?;
                ExportWriter::Csv(Box::new(writer))
            }
        })
    }

    pub fn write(&mut self, entry: &AuditEntry) -> Result<(), AuditError> {
        match self {
            ExportWriter::Jsonl(out) => {
                serde_json::to_writer(&mut *out, entry).map_err(std::io::Error::from)?;
                out.write_all(b"\n")?;
            }
            ExportWriter::Csv(writer) => writer.write_record(csv_record(entry))?,
        }
        Ok(())
    }

    /// Flushes what is buffered.
    pub fn finish(self) -> Result<(), AuditError> {
        match self {
            ExportWriter::Jsonl(mut out) => out.flush()?,
            ExportWriter::Csv(mut writer) => writer.flush()?,
        }
        Ok(())
    }

    /// Flushes what is buffered and gives back the output (an export held in memory, as the
    /// console sends it).
    pub fn into_inner(self) -> Result<W, AuditError> {
        match self {
            ExportWriter::Jsonl(mut out) => {
                out.flush()?;
                Ok(out)
            }
            ExportWriter::Csv(writer) => writer
                .into_inner()
                .map_err(|e| AuditError::Write(e.into_error())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(principal: &str, tool: &str, arguments: Value) -> AuditEntry {
        AuditEntry {
            id: 1,
            time_unix_ms: 0,
            instance: "host/1".into(),
            call_id: "call-1".into(),
            parent_call_id: None,
            run_id: "run".into(),
            tenant: String::new(),
            principal: principal.into(),
            tool: tool.into(),
            origin: "loop".into(),
            outcome: "ok".into(),
            approval: "not_needed".into(),
            denial: None,
            decided_by: None,
            record: json!({"arguments": arguments, "risk": "high"}),
        }
    }

    #[test]
    fn formula_starts_are_neutralised_and_others_kept() {
        let cases = [
            (
                "=HYPERLINK(\"http://evil\")",
                "'=HYPERLINK(\"http://evil\")",
            ),
            ("+1+1", "'+1+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("alice", "alice"),
            ("", ""),
            ("a=b", "a=b"),
        ];
        for (given, written) in cases {
            assert_eq!(neutralised(given), written, "{given:?}");
        }
    }

    #[test]
    fn hostile_cells_round_trip_quoted_and_inert() {
        let hostile = [
            ("=cmd|' /C calc'!A0", "email_send"),
            ("alice,\"bob\"\nline", "@tool"),
            ("-1", "+x"),
        ];
        let mut out = Vec::new();
        let mut writer = ExportWriter::new(ExportFormat::Csv, &mut out).unwrap();
        for (principal, tool) in hostile {
            writer
                .write(&entry(
                    principal,
                    tool,
                    json!({"body": "=2+2", "to": "a,b"}),
                ))
                .unwrap();
        }
        writer.finish().unwrap();
        let mut reader = csv::Reader::from_reader(out.as_slice());
        assert_eq!(reader.headers().unwrap().len(), CSV_HEADER.len());
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), hostile.len());
        for (row, (principal, tool)) in rows.iter().zip(hostile) {
            assert_eq!(row.len(), CSV_HEADER.len());
            for cell in row.iter() {
                assert!(
                    !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                    "a formula cell: {cell:?}"
                );
            }
            assert_eq!(&row[8], neutralised(principal).as_ref());
            assert_eq!(&row[9], neutralised(tool).as_ref());
            let arguments: Value = serde_json::from_str(&row[16]).unwrap();
            assert_eq!(arguments["body"], "=2+2", "the JSON inside is kept whole");
        }
    }

    #[test]
    fn json_lines_are_one_object_each() {
        let mut out = Vec::new();
        let mut writer = ExportWriter::new(ExportFormat::Jsonl, &mut out).unwrap();
        writer
            .write(&entry("a\nb", "t", json!({"text": "line\nbreak"})))
            .unwrap();
        writer.write(&entry("c", "t", json!(null))).unwrap();
        writer.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["principal"], "a\nb");
        assert_eq!(first["record"]["arguments"]["text"], "line\nbreak");
    }

    #[test]
    fn utc_times_match_known_dates() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_796_471_999_999, "2026-12-05T11:59:59.999Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
        ];
        for (ms, text) in cases {
            assert_eq!(utc_time(ms), text, "{ms}");
        }
    }
}
