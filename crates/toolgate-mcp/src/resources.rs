//! Resources over MCP: the protocol's side of a toolset's
//! [`ResourceSource`](toolgate_core::offers::ResourceSource), which lists its resources in
//! pages with an opaque cursor and names, for each URI, the tool call that reads it. The server
//! makes that call through the dispatcher like any `tools/call`, so a resource read gets the
//! same catalogue check, bounds, redaction, untrusted marking and trace as the tool.
//!
//! Guarantees: an [`OfferError`] becomes the JSON-RPC error it always was ([`error_data`]): a
//! cursor the source did not hand out and a prompt without a required argument are `-32602`
//! (invalid params), a URI the source does not serve is "resource not found", a store that
//! cannot list is an internal error; the message is the error's own.

use rmcp::ErrorData;
use rmcp::model::{Resource, ResourceTemplate};
use toolgate_core::offers::{self, OfferError, ResourceEntry};

/// The JSON-RPC error for `error` (for prompts too: one mapping for every offer).
pub fn error_data(error: OfferError) -> ErrorData {
    let message = error.to_string();
    match error {
        OfferError::BadCursor { .. } | OfferError::MissingArgument { .. } => {
            ErrorData::invalid_params(message, None)
        }
        OfferError::UnknownResource { .. } => ErrorData::resource_not_found(message, None),
        OfferError::Store(_) => ErrorData::internal_error(message, None),
    }
}

/// A listed resource as MCP lists it.
pub fn resource(entry: ResourceEntry) -> Resource {
    let mut resource = Resource::new(entry.uri, entry.name);
    if let Some(description) = entry.description {
        resource = resource.with_description(description);
    }
    if let Some(mime_type) = entry.mime_type {
        resource = resource.with_mime_type(mime_type);
    }
    resource
}

/// A resource template as MCP lists it.
pub fn template(template: offers::ResourceTemplate) -> ResourceTemplate {
    let mut listed = ResourceTemplate::new(template.uri_template, template.name);
    if let Some(description) = template.description {
        listed = listed.with_description(description);
    }
    if let Some(mime_type) = template.mime_type {
        listed = listed.with_mime_type(mime_type);
    }
    listed
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;

    use super::*;

    #[test]
    fn each_offer_error_keeps_its_json_rpc_code_and_message() {
        let store: Box<dyn std::error::Error + Send + Sync> = "listing notes failed: disk".into();
        let cases = [
            (
                OfferError::BadCursor {
                    cursor: "x".into(),
                    remedy: "pass back a nextCursor this server gave".into(),
                },
                ErrorCode::INVALID_PARAMS,
                "unknown cursor \"x\": pass back a nextCursor this server gave",
            ),
            (
                OfferError::UnknownResource {
                    uri: "file:///etc/passwd".into(),
                    served: "notes are note://ID, e.g. note://3".into(),
                },
                ErrorCode::RESOURCE_NOT_FOUND,
                "no such resource: file:///etc/passwd (notes are note://ID, e.g. note://3)",
            ),
            (
                OfferError::Store(store),
                ErrorCode::INTERNAL_ERROR,
                "listing notes failed: disk",
            ),
            (
                OfferError::MissingArgument {
                    prompt: "email_a_note".into(),
                    argument: "to".into(),
                },
                ErrorCode::INVALID_PARAMS,
                "prompt email_a_note needs the argument \"to\"",
            ),
        ];
        for (error, code, message) in cases {
            let data = error_data(error);
            assert_eq!((data.code, data.message.as_ref()), (code, message));
        }
    }

    #[test]
    fn a_listed_note_keeps_its_uri_name_description_and_type() {
        let listed = resource(ResourceEntry {
            uri: "note://3".into(),
            name: "Budget".into(),
            description: Some("a meeting note".into()),
            mime_type: Some("application/json".into()),
        });
        assert_eq!(
            serde_json::to_value(&listed).unwrap(),
            serde_json::json!({
                "uri": "note://3", "name": "Budget", "description": "a meeting note",
                "mimeType": "application/json"
            })
        );
    }
}
