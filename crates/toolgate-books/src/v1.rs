//! books-v1: the catalogue wrapped as a straight CRUD API, the baseline a redesign is measured
//! against. `list_items` returns every row; errors are HTTP-style status lines.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::idempotency::WriteEffect;
use toolgate_core::sql::Sql;
use toolgate_core::tool::DeclarationError;
use toolgate_core::{Effect, ErrorStyle, Risk, Tool, ToolBuilder, ToolError, ToolOutput};

use crate::rows;
use crate::store::BooksStore;

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListItemsArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetItemArgs {
    /// Item id (book_id).
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateItemArgs {
    /// Item id (book_id).
    pub id: i64,
    /// Fields to set.
    pub fields: UpdateFields,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateFields {
    /// Comma-separated tags.
    pub my_tags: Option<String>,
    /// want_to_read, reading, read, or empty.
    pub my_status: Option<String>,
}

/// Room for the whole catalogue: v1 returns everything, which is what it costs.
const LIST_MAX_BYTES: usize = 512 * 1024;

pub fn tools(store: &BooksStore) -> Result<Vec<Tool>, DeclarationError> {
    Ok(vec![
        list_items(store)?,
        get_item(store)?,
        update_item(store)?,
    ])
}

fn list_items(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<ListItemsArgs>::new("list_items", 1)
        .describe(
            "GET /items. Lists all items.",
            "you need items.",
            Some("you have an item id: use get_item."),
            "an array of item objects (book_id, title, authors, original_publication_year, average_rating, ratings_count, language_code, my_tags, my_status).",
        )
        .policy(Risk::Low, Effect::Read, "It only reads the local catalogue.")
        .error_style(ErrorStyle::Terse)
        .max_output_bytes(LIST_MAX_BYTES)
        .parallel_safe()
        .read(move |_ctx, _args: ListItemsArgs| {
            let store = store.clone();
            async move {
                let all = store.read_sql(|conn| rows::all(conn)).await?;
                Ok(ToolOutput::new(serde_json::to_value(all).unwrap_or(Value::Null)))
            }
        })
}

fn get_item(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<GetItemArgs>::new("get_item", 1)
        .describe(
            "GET /items/{id}. Gets one item.",
            "you have an item id.",
            Some("you need to find items: use list_items."),
            "the item object.",
        )
        .example("item 1", json!({"id": 1}))
        .policy(
            Risk::Low,
            Effect::Read,
            "It only reads the local catalogue.",
        )
        .error_style(ErrorStyle::Terse)
        .parallel_safe()
        .read(move |_ctx, args: GetItemArgs| {
            let store = store.clone();
            async move {
                let row = store
                    .read_sql(move |conn| rows::by_id(conn, args.id))
                    .await?;
                let row = row.ok_or_else(|| ToolError::not_found("no item"))?;
                Ok(ToolOutput::new(
                    serde_json::to_value(row).unwrap_or(Value::Null),
                ))
            }
        })
}

const STATUSES: [&str; 3] = ["want_to_read", "reading", "read"];

fn update_item(store: &BooksStore) -> Result<Tool, DeclarationError> {
    let store = store.clone();
    ToolBuilder::<UpdateItemArgs>::new("update_item", 1)
        .describe(
            "PATCH /items/{id}. Updates fields of an item.",
            "you need to change my_tags or my_status.",
            Some("you only need to read: use get_item."),
            "the updated item object.",
        )
        .example(
            "mark item 1 read",
            json!({"id": 1, "fields": {"my_status": "read"}}),
        )
        .policy(
            Risk::Medium,
            Effect::UndoableWrite,
            "It changes the user's own tags or status, and the previous values are kept for undo.",
        )
        .error_style(ErrorStyle::Terse)
        .receipts(store.receipt_log())
        .write(move |ctx, args: UpdateItemArgs| {
            let store = store.clone();
            async move {
                store
                    .write_once_sql(&ctx, move |tx| apply_update(tx, &args))
                    .await
            }
        })
}

fn apply_update(conn: &dyn Sql, args: &UpdateItemArgs) -> Result<WriteEffect, ToolError> {
    let before = rows::by_id(conn, args.id)?.ok_or_else(|| ToolError::not_found("no item"))?;
    if args.fields.my_tags.is_none() && args.fields.my_status.is_none() {
        return Err(ToolError::invalid("fields", "no fields"));
    }
    if let Some(status) = &args.fields.my_status {
        let status = status.trim();
        if !status.is_empty() && !STATUSES.contains(&status) {
            return Err(ToolError::invalid("fields.my_status", "invalid value"));
        }
        rows::set_status(conn, args.id, (!status.is_empty()).then_some(status))?;
    }
    if let Some(tags) = &args.fields.my_tags {
        rows::set_tags(conn, args.id, &rows::join_tags(rows::split_tags(tags)))?;
    }
    let after = rows::by_id(conn, args.id)?.ok_or_else(|| ToolError::internal("item vanished"))?;
    Ok(WriteEffect {
        result: serde_json::to_value(after).unwrap_or(Value::Null),
        undo: Some(
            json!([{"id": before.book_id, "my_status": before.my_status, "my_tags": before.my_tags}]),
        ),
    })
}
