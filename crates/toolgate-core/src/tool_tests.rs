use super::*;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Echo {
    #[schemars(length(min = 1))]
    text: String,
}

fn echo() -> ToolBuilder<Echo> {
    ToolBuilder::<Echo>::new("demo_echo", 1)
        .describe("Echoes text.", "you need the text back.", None, "the text.")
        .policy(
            Risk::Low,
            Effect::Read,
            "It reads nothing and changes nothing.",
        )
}

fn read_echo(b: ToolBuilder<Echo>) -> Result<Tool, DeclarationError> {
    b.read(|_ctx, args: Echo| async move { Ok(ToolOutput::new(json!(args.text))) })
}

struct NoReceipts;

impl ReceiptLog for NoReceipts {
    fn recorded(&self, _key: &IdempotencyKey) -> Result<Option<Receipt>, ToolError> {
        Ok(None)
    }
}

#[test]
fn high_risk_write_without_a_receipt_log_is_a_contract_problem() {
    let send = |with_log: bool| {
        let builder = echo().policy(Risk::High, Effect::Irreversible, "It sends text away.");
        let builder = if with_log {
            builder.receipts(NoReceipts)
        } else {
            builder
        };
        builder
            .write(|_ctx, _args: Echo| async move {
                Err::<Receipt, _>(ToolError::internal("never called"))
            })
            .unwrap()
    };
    for (with_log, flagged) in [(false, true), (true, false)] {
        let tool = send(with_log);
        let problems = crate::registry::contract_problems([&tool.spec]);
        let about_receipts = problems.iter().any(|p| p.contains("receipt log"));
        assert_eq!(about_receipts, flagged, "with_log {with_log}: {problems:?}");
    }
}

#[test]
fn declaration_table() {
    let cases: Vec<(&str, Result<Tool, DeclarationError>, Option<&str>)> = vec![
        (
            "a complete declaration is accepted",
            read_echo(echo()),
            None,
        ),
        (
            "an invalid example is refused",
            read_echo(echo().example("bad", json!({"txt": "x"}))),
            Some("does not validate"),
        ),
        (
            "a missing reason is refused",
            read_echo(echo().policy(Risk::Low, Effect::Read, " ")),
            Some("risk reason"),
        ),
        (
            "an uppercase name is refused",
            read_echo(
                ToolBuilder::<Echo>::new("Echo", 1)
                    .describe("a", "b", None, "c")
                    .policy(Risk::Low, Effect::Read, "r"),
            ),
            Some("snake_case"),
        ),
        (
            "a missing description is refused",
            read_echo(ToolBuilder::<Echo>::new("demo_echo", 1).policy(
                Risk::Low,
                Effect::Read,
                "r",
            )),
            Some("description"),
        ),
        (
            "a writing effect declared as read is refused",
            read_echo(echo().policy(Risk::Medium, Effect::UndoableWrite, "r")),
            Some("declare it with `write`"),
        ),
        (
            "a receipt log on a tool that only reads is refused",
            read_echo(echo().receipts(NoReceipts)),
            Some("belongs to a `write` tool"),
        ),
    ];
    for (name, result, want_error) in cases {
        match (result, want_error) {
            (Ok(tool), None) => assert!(schema::is_closed(&tool.spec.input_schema), "{name}"),
            (Err(e), Some(fragment)) => {
                assert!(e.to_string().contains(fragment), "{name}: {e}")
            }
            (got, want) => panic!("{name}: got {got:?}, want error {want:?}"),
        }
    }
}

#[test]
fn tool_name_table() {
    for (name, ok) in [
        ("books_search", true),
        ("b", true),
        ("notes2_get", true),
        ("_x", false),
        ("2x", false),
        ("books-search", false),
        ("BooksSearch", false),
        ("", false),
    ] {
        assert_eq!(valid_tool_name(name), ok, "{name}");
    }
}
