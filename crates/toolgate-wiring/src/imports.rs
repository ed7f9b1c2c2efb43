//! MCP imports for every front end: the imported tools handed to a dispatcher as
//! [`ExtraTools`], beside a toolset's own.
//!
//! Guarantees: exactly the tools the imports offer, and exactly the names they withhold (so a
//! call to a quarantined tool is refused with its reason, not as unknown).

use toolgate_mcp_client::imports::Imports;

use crate::dispatch::ExtraTools;

/// The offered tools and the withheld names, for a dispatcher beside a toolset's tools (with
/// `tool_search` over all of them when `with_search`).
pub fn extra_tools(imports: &Imports, with_search: bool) -> ExtraTools {
    ExtraTools {
        tools: imports.tools.clone(),
        withheld: imports.withheld.clone(),
        with_search,
        code: None,
    }
}
