//! The egress case file format and its expansion into one [`Spec`] per case.
//!
//! A file holds `[[case]]` tables (one case each) and `[[family]]` tables (many cases from one
//! URL template and a list of members); both may appear in one file, unknown fields are refused.
//!
//! ```toml
//! [[case]]
//! id = "redirect-2-hops-off-list"   # unique across every file
//! category = "redirect-chain"       # the report groups by it
//! expect = "block"                  # "block" (must be stopped) or "allow" (must pass)
//! url = "http://allowed.test:{port}/start"
//! exit = "main"                     # optional: "main" (default), "tight" or "literal"
//! redirects = ["http://r1.hops.test:{port}/a", "http://evil.test:{port}/b"]  # optional
//! rule = "unlisted_host"            # optional: the rule the block must cite
//! hops = ["http://allowed.test:{port}/start", "http://r1.hops.test:{port}/a",
//!         "http://evil.test:{port}/b"]                                     # optional
//! pinned = "rebind.test"            # optional: see "pinned" below
//! note = "what the case tries"      # optional
//!
//! [[family]]
//! prefix = "ip-metadata"            # each member's id is `<prefix>-<name>`
//! category = "ip-literal"
//! expect = "block"
//! url = "http://{x}:{port}/latest/meta-data/"   # must contain {x}
//! rule = "non_canonical_host"       # optional default for the members
//! exit = "main"                     # optional
//! members = [
//!   { name = "dotted", x = "169.254.169.254", rule = "ip_literal_not_listed" },
//!   { name = "decimal", x = "2852039166" },
//! ]
//! ```
//!
//! Placeholders, replaced in `url`, `redirects`, `hops` and a member's `x`: `{port}` (the
//! plain server's port, on 127.0.0.1), `{tls_port}` (the HTTPS server's port) and, in a family's
//! `url`, `{x}` (the member's value). `redirects` are the `Location` values the local servers
//! answer with, in order, to the case's first requests (verbatim, so relative, scheme-relative
//! and malformed locations can be written); later requests get the fixed routes.
//! `pinned = NAME` marks a DNS-change case: it is blocked only if the exit asked the resolver
//! for NAME exactly once, the trap address (the resolver's later answer) saw no connection, the
//! request was served at the first answer, and the trace line lists only that answer.
//!
//! Refuses (naming the file and the case): a family `url` without `{x}`, a family with no
//! members, a member without a name, `pinned` on a case that does not expect a block, and an
//! unknown `exit`, `expect` or field.

use std::path::PathBuf;

use serde::Deserialize;

use crate::cases::CaseSource;
use crate::error::CheckError;

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default)]
    pub case: Vec<CaseEntry>,
    #[serde(default)]
    pub family: Vec<Family>,
}

/// What a case must end in. (`measure` has no meaning here: every egress case is a hard line.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    Block,
    Allow,
}

/// Which exit of the test world runs the case (see the module doc of `egress`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitName {
    /// The test allowlist, 64 KiB body cap, 10 s time cap, 5 redirects.
    #[default]
    Main,
    /// As `main` with a 1 s time cap (slow bodies).
    Tight,
    /// As `main` plus the exact address `127.0.0.1` (http, the plain server's port).
    Literal,
}

impl ExitName {
    pub fn as_str(self) -> &'static str {
        match self {
            ExitName::Main => "main",
            ExitName::Tight => "tight",
            ExitName::Literal => "literal",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseEntry {
    pub id: String,
    pub category: String,
    pub expect: Expectation,
    pub url: String,
    #[serde(default)]
    pub exit: ExitName,
    #[serde(default)]
    pub redirects: Vec<String>,
    pub rule: Option<String>,
    pub hops: Option<Vec<String>>,
    pub pinned: Option<String>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub prefix: String,
    pub category: String,
    pub expect: Expectation,
    pub url: String,
    #[serde(default)]
    pub exit: ExitName,
    pub rule: Option<String>,
    pub note: Option<String>,
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub name: String,
    pub x: String,
    pub rule: Option<String>,
    pub note: Option<String>,
}

/// One case, ready to run: placeholders still in (they are filled once the ports are known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub id: String,
    /// The file it came from.
    pub origin: String,
    pub category: String,
    pub expect: Expectation,
    pub url: String,
    pub exit: ExitName,
    pub redirects: Vec<String>,
    pub rule: Option<String>,
    pub hops: Option<Vec<String>>,
    pub pinned: Option<String>,
    pub note: Option<String>,
}

/// The ports the placeholders stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub http: u16,
    pub tls: u16,
}

/// `text` with `{port}` and `{tls_port}` replaced.
pub fn fill(text: &str, ports: Ports) -> String {
    text.replace("{tls_port}", &ports.tls.to_string())
        .replace("{port}", &ports.http.to_string())
}

/// Every case of every file, families expanded, in file order.
pub fn expand(files: &[CaseSource<CaseFile>]) -> Result<Vec<Spec>, CheckError> {
    let mut specs = Vec::new();
    for source in files {
        let refuse = |message: String| CheckError::Cases {
            path: PathBuf::from(&source.origin),
            message,
        };
        for case in &source.file.case {
            if case.pinned.is_some() && case.expect != Expectation::Block {
                return Err(refuse(format!(
                    "case `{}`: `pinned` needs expect = \"block\"",
                    case.id
                )));
            }
            specs.push(Spec {
                id: case.id.clone(),
                origin: source.origin.clone(),
                category: case.category.clone(),
                expect: case.expect,
                url: case.url.clone(),
                exit: case.exit,
                redirects: case.redirects.clone(),
                rule: case.rule.clone(),
                hops: case.hops.clone(),
                pinned: case.pinned.clone(),
                note: case.note.clone(),
            });
        }
        for family in &source.file.family {
            if !family.url.contains("{x}") {
                return Err(refuse(format!(
                    "family `{}`: its url has no {{x}} for the members to fill",
                    family.prefix
                )));
            }
            if family.members.is_empty() {
                return Err(refuse(format!("family `{}` has no members", family.prefix)));
            }
            for member in &family.members {
                if member.name.trim().is_empty() {
                    return Err(refuse(format!(
                        "family `{}`: a member has an empty name",
                        family.prefix
                    )));
                }
                specs.push(Spec {
                    id: format!("{}-{}", family.prefix, member.name),
                    origin: source.origin.clone(),
                    category: family.category.clone(),
                    expect: family.expect,
                    url: family.url.replace("{x}", &member.x),
                    exit: family.exit,
                    redirects: Vec::new(),
                    rule: member.rule.clone().or_else(|| family.rule.clone()),
                    hops: None,
                    pinned: None,
                    note: member.note.clone().or_else(|| family.note.clone()),
                });
            }
        }
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::load_cases;

    fn load(text: &str) -> Result<Vec<Spec>, CheckError> {
        expand(&load_cases::<CaseFile>(
            &[("security/egress/t.toml", text)],
            &[],
        )?)
    }

    #[test]
    fn family_members_become_cases_with_their_own_ids_and_rules() {
        let specs = load(
            r#"
            [[family]]
            prefix = "ip"
            category = "ip-literal"
            expect = "block"
            url = "http://{x}:{port}/"
            rule = "non_canonical_host"
            members = [
              { name = "dotted", x = "127.0.0.1", rule = "ip_literal_not_listed" },
              { name = "hex", x = "0x7f.1" },
            ]
            "#,
        )
        .unwrap();
        let got: Vec<(&str, &str, Option<&str>)> = specs
            .iter()
            .map(|s| (s.id.as_str(), s.url.as_str(), s.rule.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "ip-dotted",
                    "http://127.0.0.1:{port}/",
                    Some("ip_literal_not_listed")
                ),
                (
                    "ip-hex",
                    "http://0x7f.1:{port}/",
                    Some("non_canonical_host")
                ),
            ]
        );
    }

    #[test]
    fn malformed_files_are_refused_naming_the_file_and_the_case() {
        let cases = [
            (
                "[[family]]\nprefix = \"f\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://a/\"\nmembers = [{ name = \"a\", x = \"b\" }]\n",
                "{x}",
            ),
            (
                "[[family]]\nprefix = \"f\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://{x}/\"\nmembers = []\n",
                "no members",
            ),
            (
                "[[case]]\nid = \"p\"\ncategory = \"c\"\nexpect = \"allow\"\nurl = \"http://a/\"\npinned = \"a\"\n",
                "pinned",
            ),
            (
                "[[case]]\nid = \"e\"\ncategory = \"c\"\nexpect = \"measure\"\nurl = \"http://a/\"\n",
                "measure",
            ),
            (
                "[[case]]\nid = \"x\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://a/\"\nexit = \"wide-open\"\n",
                "wide-open",
            ),
            (
                "[[case]]\nid = \"u\"\ncategory = \"c\"\nexpect = \"block\"\nurl = \"http://a/\"\nrules = \"x\"\n",
                "rules",
            ),
        ];
        for (text, needle) in cases {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains("security/egress/t.toml"), "{err}");
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn placeholders_are_filled_with_the_servers_ports() {
        let ports = Ports {
            http: 8123,
            tls: 9443,
        };
        assert_eq!(
            fill("http://a:{port}/ https://b:{tls_port}/ {x}", ports),
            "http://a:8123/ https://b:9443/ {x}"
        );
    }
}
