use serde_json::json;
use toolgate_core::spec::{Expected, JsonType};

use super::*;

#[tokio::test]
async fn examples_a_deliberately_wrong_expected_result_fails_naming_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ready) = example_dispatcher(ToolsetName::BooksV3, dir.path()).unwrap();
    let mut examples = declared_examples(&ready);
    let (tool, example) = examples
        .iter_mut()
        .find(|(tool, _)| tool == "books_search")
        .unwrap();
    let tool = tool.clone();
    example.expected = Some(Expected::values(&[("/total", json!(-1))]));
    let wrong = example.label.clone();
    let reports = run_examples(&store, &ready, examples).await.unwrap();
    let failed: Vec<&ExampleReport> = reports.iter().filter(|r| !r.passed()).collect();
    assert_eq!(failed.len(), 1, "{reports:?}");
    assert_eq!(
        (failed[0].tool.as_str(), failed[0].label.as_str()),
        (tool.as_str(), wrong.as_str())
    );
    let Verdict::Failed(why) = &failed[0].verdict else {
        unreachable!()
    };
    assert!(why.join(" ").contains("`/total`"), "{why:?}");
}

#[tokio::test]
async fn examples_an_error_fails_unless_the_example_expects_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ready) = example_dispatcher(ToolsetName::BooksV2, dir.path()).unwrap();
    let missing = json!({"ids": [999999]});
    let example = |expected| Example {
        label: "a book that is not there".into(),
        arguments: missing.clone(),
        expected,
    };
    let cases = vec![
        ("an unexpected error fails", example(None), false),
        (
            "an expected error code passes",
            example(Some(Expected::error(toolgate_core::ErrorCode::NotFound))),
            true,
        ),
        (
            "an expected shape is not met by an error",
            example(Some(Expected::shape(&[("/books", JsonType::Array)]))),
            false,
        ),
    ];
    for (what, example, passes) in cases {
        let reports = run_examples(&store, &ready, vec![("books_get".into(), example)])
            .await
            .unwrap();
        assert_eq!(reports[0].passed(), passes, "{what}: {reports:?}");
    }
}

#[tokio::test]
async fn examples_every_toolset_s_own_examples_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut failed = Vec::new();
    for toolset in ToolsetName::ALL {
        let reports = check_toolset(toolset, dir.path()).await.unwrap();
        assert!(!reports.is_empty(), "{toolset}");
        failed.extend(
            reports
                .into_iter()
                .filter(|r| !r.passed())
                .map(|r| format!("{toolset} {} ({}): {:?}", r.tool, r.label, r.verdict)),
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
