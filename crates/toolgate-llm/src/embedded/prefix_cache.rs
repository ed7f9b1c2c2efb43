//! The fixed prompt prefix's KV state on disk, so a new process does not prefill the system
//! prompt and tool definitions again (about 3,000 tokens for notes, some 45 s on 2 cores).
//!
//! Contract: an entry is used only when everything that shapes its KV contents is the same as
//! now: the model file's SHA-256, the context settings that change the KV bytes (see
//! [`settings_text`]), the llama.cpp binding's version, and the exact prefix tokens. Each entry
//! is two files named after the key: `<key>.kv` (llama.cpp's sequence-state file, which also
//! holds the tokens) and `<key>.json` (what the key was made of, plus the `.kv` file's size and
//! SHA-256). Before llama.cpp reads a `.kv` file its size and digest are checked against the
//! metadata, so a truncated or corrupt file never reaches llama.cpp's parser; after the load
//! the tokens the file holds must equal the prefix exactly. An entry that fails any check is
//! ignored with a one-line note and never trusted; the caller then prefills as if there were no
//! cache. Writing goes to a temporary file renamed into place, the `.kv` first and its
//! metadata last, so a reader sees either no entry, the old one (whose digest then no longer
//! matches the new `.kv`: ignored), or the whole new one. Failing to write never fails a
//! request. At most [`KEEP_ENTRIES`] entries are kept, the least recently used go first.
//!
//! The model's digest is memoized in a side file keyed by the file's device, inode, size and
//! modification time: hashing the ~1 GB GGUF cost about 0.6 s per start here with the file
//! already in the page cache (half of a 1.2 s model load) and a full disk read when it is not,
//! and a file replaced by a download or a copy changes at least one of the four. A file rewritten in place to the same size within the same mtime
//! tick would fool it; `scripts/fetch-model.py` writes a new file and renames it, so it does
//! not.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The binding whose state format the files carry (pinned with `=` in Cargo.toml; a unit test
/// checks the two agree).
pub const LLAMA_CPP_2_VERSION: &str = "0.1.160";

/// Bumped whenever the entry layout or the key's derivation changes.
const FORMAT: u32 = 1;

/// Entries kept on disk. One entry is the prefix of one toolset as offered (notes, books-v1..,
/// utility, a tool-search catalogue...); an eval alternates at most a handful of toolsets, and
/// `ask` and the demo add one or two more, so 8 keeps every toolset of a session warm while
/// bounding the folder: an entry is about 28 KB per prefix token for the 1.5B model (~90 MB
/// for notes' ~3,000 tokens), so 8 entries stay well under 1 GB.
pub const KEEP_ENTRIES: usize = 8;

/// Why an entry on disk was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("no entry for this prefix")]
    Missing,
    #[error("its metadata is unreadable ({0})")]
    Unreadable(String),
    #[error("it was written in another cache format ({0})")]
    OtherFormat(u32),
    #[error("it was made with another model file")]
    OtherModel,
    #[error("it was made with other context settings ({0})")]
    OtherSettings(String),
    #[error("it holds another prefix")]
    OtherPrefix,
    #[error("its state file is truncated or grown ({actual} bytes, {expected} expected)")]
    WrongSize { expected: u64, actual: u64 },
    #[error("its state file is corrupt (digest differs)")]
    Corrupt,
    #[error("llama.cpp refused its state file")]
    Refused,
    #[error("its saved tokens differ from the prefix")]
    TokensDiffer,
}

impl Rejection {
    /// Whether the entry is worth a note: a missing entry is the ordinary first run.
    pub fn is_notable(&self) -> bool {
        match self {
            Rejection::Missing => false,
            Rejection::Unreadable(_)
            | Rejection::OtherFormat(_)
            | Rejection::OtherModel
            | Rejection::OtherSettings(_)
            | Rejection::OtherPrefix
            | Rejection::WrongSize { .. }
            | Rejection::Corrupt
            | Rejection::Refused
            | Rejection::TokensDiffer => true,
        }
    }
}

/// Why the cache could not be opened or an entry not written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("llama.cpp did not write the state: {0}")]
    Save(String),
    #[error("the metadata could not be written: {0}")]
    Meta(#[from] serde_json::Error),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Everything an entry must match, for one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixKey {
    pub model_digest: String,
    pub settings: String,
    pub prefix_hash: String,
    pub prefix_len: usize,
}

impl PrefixKey {
    pub fn new(model_digest: &str, settings: &str, tokens: &[i32]) -> PrefixKey {
        PrefixKey {
            model_digest: model_digest.to_owned(),
            settings: settings.to_owned(),
            prefix_hash: token_hash(tokens),
            prefix_len: tokens.len(),
        }
    }

    /// The entry's file stem: a digest of every part of the key, each length-prefixed so no two
    /// keys run together into the same bytes.
    pub fn entry_name(&self) -> String {
        let mut h = Sha256::new();
        h.update(FORMAT.to_le_bytes());
        for part in [
            self.model_digest.as_bytes(),
            self.settings.as_bytes(),
            self.prefix_hash.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update((self.prefix_len as u64).to_le_bytes());
        hex(&h.finalize())
    }
}

/// SHA-256 of the token ids (little-endian i32s, count first).
pub fn token_hash(tokens: &[i32]) -> String {
    let mut h = Sha256::new();
    h.update((tokens.len() as u64).to_le_bytes());
    for t in tokens {
        h.update(t.to_le_bytes());
    }
    hex(&h.finalize())
}

/// The context settings that change what the KV cache holds or how it is laid out, as one line.
/// Thread count is included although llama.cpp's CPU kernels give each output to one thread:
/// it costs nothing on one machine and rules out a reduction order that depends on it.
#[allow(clippy::too_many_arguments)]
pub fn settings_text(
    n_ctx: u32,
    n_batch: u32,
    n_ubatch: u32,
    n_threads: i32,
    type_k: &str,
    type_v: &str,
    flash_attn: i64,
    swa_full: bool,
) -> String {
    format!(
        "llama-cpp-2 {LLAMA_CPP_2_VERSION}; n_ctx {n_ctx}; n_batch {n_batch}; n_ubatch {n_ubatch}; \
         threads {n_threads}; kv {type_k}/{type_v}; flash_attn {flash_attn}; swa_full {swa_full}"
    )
}

/// What `<key>.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    pub format: u32,
    pub model_digest: String,
    pub settings: String,
    pub prefix_hash: String,
    pub prefix_len: usize,
    pub kv_sha256: String,
    pub kv_bytes: u64,
}

/// Whether `meta` describes an entry for `key` (the state file itself is checked apart).
pub fn check_meta(meta: &EntryMeta, key: &PrefixKey) -> Result<(), Rejection> {
    if meta.format != FORMAT {
        return Err(Rejection::OtherFormat(meta.format));
    }
    if meta.model_digest != key.model_digest {
        return Err(Rejection::OtherModel);
    }
    if meta.settings != key.settings {
        return Err(Rejection::OtherSettings(meta.settings.clone()));
    }
    if meta.prefix_hash != key.prefix_hash || meta.prefix_len != key.prefix_len {
        return Err(Rejection::OtherPrefix);
    }
    Ok(())
}

/// One entry found on disk, for eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub name: String,
    pub last_used: SystemTime,
}

/// The entries to remove so that at most `keep` remain: the least recently used.
pub fn to_evict(mut entries: Vec<Found>, keep: usize) -> Vec<String> {
    // Newest first; equal times by name so the choice does not depend on listing order.
    entries.sort_by(|a, b| {
        b.last_used
            .cmp(&a.last_used)
            .then_with(|| a.name.cmp(&b.name))
    });
    entries.into_iter().skip(keep).map(|e| e.name).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_file(path: &Path) -> io::Result<(String, u64)> {
    let mut file = fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex(&h.finalize()), total))
}

/// The file's identity for the digest memo: device, inode, size, modification time (ns).
fn file_stamp(path: &Path) -> io::Result<String> {
    let meta = fs::metadata(path)?;
    let mtime = meta
        .modified()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let (dev, ino) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (dev, ino) = (0u64, 0u64);
    Ok(format!("{dev} {ino} {} {mtime}", meta.len()))
}

#[derive(Debug, Serialize, Deserialize)]
struct DigestMemo {
    stamp: String,
    sha256: String,
}

/// The model file's SHA-256, from the memo in `dir` when the file's stamp is unchanged.
pub fn model_digest(model: &Path, dir: &Path) -> Result<String, CacheError> {
    let stamp = file_stamp(model).map_err(io_at(model))?;
    let canonical = fs::canonicalize(model).map_err(io_at(model))?;
    let memo_path = dir.join(format!(
        "model-{}.digest.json",
        &token_hash_of_bytes(canonical.to_string_lossy().as_bytes())[..16]
    ));
    if let Ok(text) = fs::read_to_string(&memo_path)
        && let Ok(memo) = serde_json::from_str::<DigestMemo>(&text)
        && memo.stamp == stamp
        && memo.sha256.len() == 64
    {
        return Ok(memo.sha256);
    }
    let (sha256, _) = sha256_file(model).map_err(io_at(model))?;
    // A memo that cannot be written only costs the next start another hash.
    let memo = serde_json::to_vec(&DigestMemo {
        stamp,
        sha256: sha256.clone(),
    })?;
    let _ = write_atomically(&memo_path, |f| {
        f.write_all(&memo).map_err(io_at(&memo_path))
    });
    Ok(sha256)
}

fn token_hash_of_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A temporary name beside `path`, unique to this process.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut fs::File) -> Result<(), CacheError>,
) -> Result<(), CacheError> {
    let tmp = temp_beside(path);
    let result = (|| {
        let mut file = fs::File::create(&tmp).map_err(io_at(&tmp))?;
        write(&mut file)?;
        file.sync_all().map_err(io_at(&tmp))?;
        fs::rename(&tmp, path).map_err(io_at(path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The prefix cache of one model and one set of context settings.
#[derive(Debug)]
pub struct PrefixCache {
    dir: PathBuf,
    model_digest: String,
    settings: String,
}

impl PrefixCache {
    /// Opens (creates) `dir` and finds the model's digest.
    pub fn open(dir: &Path, model: &Path, settings: String) -> Result<PrefixCache, CacheError> {
        fs::create_dir_all(dir).map_err(io_at(dir))?;
        let model_digest = model_digest(model, dir)?;
        Ok(PrefixCache {
            dir: dir.to_path_buf(),
            model_digest,
            settings,
        })
    }

    pub fn key(&self, tokens: &[i32]) -> PrefixKey {
        PrefixKey::new(&self.model_digest, &self.settings, tokens)
    }

    fn paths(&self, key: &PrefixKey) -> (PathBuf, PathBuf) {
        let name = key.entry_name();
        (
            self.dir.join(format!("{name}.kv")),
            self.dir.join(format!("{name}.json")),
        )
    }

    /// The state file of `key`'s entry, once its metadata matches the key and the file's size
    /// and digest match the metadata. Marks the entry as used.
    pub fn verified_state(&self, key: &PrefixKey) -> Result<PathBuf, Rejection> {
        let (kv, meta_path) = self.paths(key);
        let text = match fs::read_to_string(&meta_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Rejection::Missing),
            Err(e) => return Err(Rejection::Unreadable(e.to_string())),
        };
        let meta: EntryMeta =
            serde_json::from_str(&text).map_err(|e| Rejection::Unreadable(e.to_string()))?;
        check_meta(&meta, key)?;
        let (digest, bytes) = sha256_file(&kv)
            .map_err(|e| Rejection::Unreadable(format!("{}: {e}", kv.display())))?;
        if bytes != meta.kv_bytes {
            return Err(Rejection::WrongSize {
                expected: meta.kv_bytes,
                actual: bytes,
            });
        }
        if digest != meta.kv_sha256 {
            return Err(Rejection::Corrupt);
        }
        // Recency for eviction; a failure only makes the entry look older.
        if let Ok(file) = fs::File::options().append(true).open(&meta_path) {
            let _ = file.set_modified(SystemTime::now());
        }
        Ok(kv)
    }

    /// Writes `key`'s entry: `save` writes llama.cpp's state file at the path it is given (a
    /// temporary one), then the metadata goes in place; then old entries are evicted.
    pub fn store(
        &self,
        key: &PrefixKey,
        save: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<(), CacheError> {
        let (kv, meta_path) = self.paths(key);
        let tmp = temp_beside(&kv);
        let written = save(&tmp)
            .map_err(CacheError::Save)
            .and_then(|()| sha256_file(&tmp).map_err(io_at(&tmp)))
            .and_then(|digest| fs::rename(&tmp, &kv).map_err(io_at(&kv)).map(|()| digest));
        let (kv_sha256, kv_bytes) = match written {
            Ok(d) => d,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let meta = serde_json::to_vec_pretty(&EntryMeta {
            format: FORMAT,
            model_digest: key.model_digest.clone(),
            settings: key.settings.clone(),
            prefix_hash: key.prefix_hash.clone(),
            prefix_len: key.prefix_len,
            kv_sha256,
            kv_bytes,
        })?;
        write_atomically(&meta_path, |f| {
            f.write_all(&meta).map_err(io_at(&meta_path))
        })?;
        self.evict();
        Ok(())
    }

    /// Removes the least recently used entries past [`KEEP_ENTRIES`]; best effort.
    fn evict(&self) {
        let Ok(listing) = fs::read_dir(&self.dir) else {
            return;
        };
        let found: Vec<Found> = listing
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".json")?;
                (stem.len() == 64).then_some(())?;
                let last_used = e.metadata().ok()?.modified().ok()?;
                Some(Found {
                    name: stem.to_owned(),
                    last_used,
                })
            })
            .collect();
        for name in to_evict(found, KEEP_ENTRIES) {
            // The metadata first, so a half-removed entry is never found.
            let _ = fs::remove_file(self.dir.join(format!("{name}.json")));
            let _ = fs::remove_file(self.dir.join(format!("{name}.kv")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> PrefixKey {
        PrefixKey::new("m", "s", &[1, 2, 3])
    }

    fn meta_for(key: &PrefixKey) -> EntryMeta {
        EntryMeta {
            format: FORMAT,
            model_digest: key.model_digest.clone(),
            settings: key.settings.clone(),
            prefix_hash: key.prefix_hash.clone(),
            prefix_len: key.prefix_len,
            kv_sha256: "x".into(),
            kv_bytes: 1,
        }
    }

    #[test]
    fn any_difference_in_model_settings_or_tokens_changes_the_entry() {
        let base = key();
        let cases = [
            ("other model", PrefixKey::new("m2", "s", &[1, 2, 3])),
            ("other settings", PrefixKey::new("m", "s2", &[1, 2, 3])),
            ("other token", PrefixKey::new("m", "s", &[1, 2, 4])),
            ("one token more", PrefixKey::new("m", "s", &[1, 2, 3, 0])),
            ("one token fewer", PrefixKey::new("m", "s", &[1, 2])),
            // Length-prefixed parts: moving bytes between parts is another key.
            ("parts run together", PrefixKey::new("ms", "", &[1, 2, 3])),
        ];
        for (what, other) in cases {
            assert_ne!(base.entry_name(), other.entry_name(), "{what}");
        }
        assert_eq!(base.entry_name(), key().entry_name());
        assert_eq!(base.entry_name().len(), 64);
    }

    #[test]
    fn token_order_and_count_are_part_of_the_prefix_hash() {
        let cases: [(&[i32], &[i32]); 3] = [(&[1, 2], &[2, 1]), (&[], &[0]), (&[256], &[1, 0])];
        for (a, b) in cases {
            assert_ne!(token_hash(a), token_hash(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn metadata_from_another_model_settings_or_prefix_is_not_trusted() {
        let k = key();
        let mut other_format = meta_for(&k);
        other_format.format = FORMAT + 1;
        let mut other_model = meta_for(&k);
        other_model.model_digest = "m2".into();
        let mut other_settings = meta_for(&k);
        other_settings.settings = "s2".into();
        let mut other_prefix = meta_for(&k);
        other_prefix.prefix_hash = token_hash(&[9]);
        let mut other_len = meta_for(&k);
        other_len.prefix_len = 4;
        let cases = [
            (meta_for(&k), Ok(())),
            (other_format, Err(Rejection::OtherFormat(FORMAT + 1))),
            (other_model, Err(Rejection::OtherModel)),
            (other_settings, Err(Rejection::OtherSettings("s2".into()))),
            (other_prefix, Err(Rejection::OtherPrefix)),
            (other_len, Err(Rejection::OtherPrefix)),
        ];
        for (meta, want) in cases {
            assert_eq!(check_meta(&meta, &k), want, "{meta:?}");
        }
    }

    #[test]
    fn eviction_keeps_the_most_recently_used() {
        let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let found = |pairs: &[(&str, u64)]| -> Vec<Found> {
            pairs
                .iter()
                .map(|(n, s)| Found {
                    name: (*n).into(),
                    last_used: t(*s),
                })
                .collect()
        };
        let cases: [(Vec<Found>, usize, Vec<&str>); 4] = [
            (found(&[("a", 1), ("b", 2)]), 2, vec![]),
            (found(&[("a", 1), ("b", 3), ("c", 2)]), 2, vec!["a"]),
            (found(&[("a", 5), ("b", 1), ("c", 3)]), 1, vec!["c", "b"]),
            // Ties broken by name, whatever the listing order.
            (found(&[("z", 1), ("y", 1)]), 1, vec!["z"]),
        ];
        for (entries, keep, want) in cases {
            assert_eq!(to_evict(entries, keep), want);
        }
    }

    #[test]
    fn settings_name_the_pinned_binding_version() {
        let manifest = include_str!("../../Cargo.toml");
        assert!(
            manifest.contains(&format!(
                "llama-cpp-2 = {{ version = \"={LLAMA_CPP_2_VERSION}\""
            )),
            "bump LLAMA_CPP_2_VERSION with the llama-cpp-2 pin"
        );
        let a = settings_text(4096, 512, 512, 2, "F16", "F16", -1, false);
        let b = settings_text(8192, 512, 512, 2, "F16", "F16", -1, false);
        assert_ne!(a, b);
        assert!(a.contains(LLAMA_CPP_2_VERSION));
    }

    #[test]
    fn the_digest_memo_is_used_only_while_the_file_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        fs::write(&model, b"weights one").unwrap();
        let first = model_digest(&model, dir.path()).unwrap();
        assert_eq!(first, token_hash_of_bytes(b"weights one"));
        // Forge the memo: while the stamp matches it is believed (that is the point of it).
        let memo = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".digest.json"))
            .unwrap();
        let text = fs::read_to_string(&memo)
            .unwrap()
            .replace(&first, &"0".repeat(64));
        fs::write(&memo, text).unwrap();
        assert_eq!(model_digest(&model, dir.path()).unwrap(), "0".repeat(64));
        // A new file (another size) is hashed again.
        fs::write(&model, b"weights two, longer").unwrap();
        assert_eq!(
            model_digest(&model, dir.path()).unwrap(),
            token_hash_of_bytes(b"weights two, longer")
        );
    }

    #[test]
    fn a_truncated_or_altered_state_file_is_refused_before_llama_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        fs::write(&model, b"w").unwrap();
        let cache = PrefixCache::open(&dir.path().join("c"), &model, "s".into()).unwrap();
        let k = cache.key(&[1, 2, 3]);
        assert_eq!(cache.verified_state(&k), Err(Rejection::Missing));
        cache
            .store(&k, |p| {
                fs::write(p, b"state bytes").map_err(|e| e.to_string())
            })
            .unwrap();
        let kv = cache.verified_state(&k).unwrap();
        fs::write(&kv, b"state byt").unwrap();
        assert_eq!(
            cache.verified_state(&k),
            Err(Rejection::WrongSize {
                expected: 11,
                actual: 9
            })
        );
        fs::write(&kv, b"state bytez").unwrap();
        assert_eq!(cache.verified_state(&k), Err(Rejection::Corrupt));
        // A failed save leaves no entry and no temporary file.
        let k2 = cache.key(&[4]);
        assert!(cache.store(&k2, |_| Err("no".into())).is_err());
        assert_eq!(cache.verified_state(&k2), Err(Rejection::Missing));
        let names: Vec<String> = fs::read_dir(dir.path().join("c"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
