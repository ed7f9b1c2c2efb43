//! `toolgate mcp install` / `uninstall`: a host's MCP configuration file changed to put toolgate
//! in front, after showing the diff and asking; restored from the backup. The reading, the
//! plan, the diff, the backup and the restore are the wiring's ([`toolgate_wiring::host_config`]);
//! this module finds the file, prints and asks.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use toolgate_wiring::host_config::{
    Host, HostFileError, InstallRequest, absent, diff, parse, plan, render, restore,
    write_with_backup,
};

use super::CommandError;
use crate::cli::{HostFileArgs, McpInstallArgs, McpUninstallArgs};

/// The host and its file: `--file`, else the host's user-level file.
fn host_file(args: &HostFileArgs) -> Result<(Host, PathBuf), CommandError> {
    let refused = |path: &str, source| CommandError::HostFile {
        path: path.to_string(),
        source,
    };
    let host: Host = args.host.parse().map_err(|e| refused(&args.host, e))?;
    let path = match &args.file {
        Some(path) => path.clone(),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .ok_or_else(|| CommandError::Usage("HOME is not set: pass --file PATH".into()))?;
            host.default_file(&home, std::env::consts::OS)
                .map_err(|e| refused(host.as_str(), e))?
        }
    };
    Ok((host, path))
}

pub fn install(args: &McpInstallArgs) -> Result<(), CommandError> {
    let (host, path) = host_file(&args.host)?;
    let shown = path.display().to_string();
    let refused = |source| CommandError::HostFile {
        path: shown.clone(),
        source,
    };
    // No file yet (Claude Desktop writes its own only once a setting changes): created, in a
    // folder that must exist (the host's own, else it is not installed here).
    let read = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
            if folder.is_some_and(|f| !f.is_dir()) {
                return Err(CommandError::Usage(format!(
                    "{shown} does not exist, nor does its folder: is {host} installed? (or pass \
                     --file PATH)"
                )));
            }
            None
        }
        Err(e) => {
            return Err(CommandError::Usage(format!(
                "cannot read {host}'s file {shown}: {e}"
            )));
        }
    };
    let (text, file) = match &read {
        Some(bytes) => {
            let text = String::from_utf8(bytes.clone())
                .map_err(|_| refused(HostFileError::NotJson("it is not UTF-8 text".into())))?;
            let file = parse(host, &text).map_err(refused)?;
            (text, file)
        }
        None => {
            println!("{shown} does not exist yet: it will be created");
            (String::new(), absent(host))
        }
    };
    let program = match &args.program {
        Some(program) => program.clone(),
        None => std::env::current_exe()?,
    };
    let program = program.display().to_string();
    let toolsets: Vec<String> = if args.no_toolset {
        Vec::new()
    } else {
        args.toolset.iter().map(ToString::to_string).collect()
    };
    let request = InstallRequest {
        program: &program,
        toolsets: &toolsets,
        wrap_all: args.wrap_all,
    };
    let planned = plan(&file, &request).map_err(refused)?;
    println!("{host}: {shown}");
    for change in &planned.changes {
        println!("  {change}");
    }
    if !planned.writes() {
        println!("nothing to change; the file is left as it is");
        return Ok(());
    }
    let new_text = render(&file, &planned.document);
    print!("{}", diff(&shown, &text, &new_text));
    std::io::stdout().flush()?;
    if !args.yes && !confirmed()? {
        println!("nothing written");
        return Ok(());
    }
    let written =
        write_with_backup(&path, read.as_deref(), &new_text, unix_now()).map_err(refused)?;
    println!(
        "wrote {shown}; the file as it was is kept in {} (`toolgate mcp uninstall --host {}{}` \
         puts it back). Restart {host} to use it.",
        written.backup.display(),
        host.as_str(),
        args.host
            .file
            .as_ref()
            .map(|f| format!(" --file {}", f.display()))
            .unwrap_or_default(),
    );
    Ok(())
}

/// "write these changes? [y/N]", answered on standard input; anything but y or yes (or no
/// answer at all) is no.
fn confirmed() -> Result<bool, CommandError> {
    eprint!("write these changes? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    let stdin = std::io::stdin();
    if stdin.lock().read_line(&mut answer)? == 0 && !stdin.is_terminal() {
        eprintln!();
        eprintln!(
            "toolgate: no answer (standard input is closed); pass --yes to write without asking"
        );
    }
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

pub fn uninstall(args: &McpUninstallArgs) -> Result<(), CommandError> {
    let (host, path) = host_file(&args.host)?;
    let shown = path.display().to_string();
    let restored = restore(&path, args.force).map_err(|source| CommandError::HostFile {
        path: shown.clone(),
        source,
    })?;
    if restored.removed {
        println!(
            "removed {shown}: there was none before toolgate wrote it; restart {host} to use that"
        );
    } else {
        println!(
            "restored {shown} from {} (byte for byte); restart {host} to use it",
            restored.backup.display()
        );
    }
    Ok(())
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
