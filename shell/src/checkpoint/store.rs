//! The content-addressed object store shared by every project and session:
//! `$OPENMAX_HOME/checkpoints/objects/<2 hex>/<62 hex>`, each object named by the sha256 of
//! its bytes (a file's contents, or a directory listing from [`super::tree`]).
//!
//! Invariants:
//! - An object's bytes never change once its name exists: it is written to a temp file in the
//!   same directory and renamed into place, so a reader never sees half of one (a stray temp
//!   file is removed by the next collection). Objects are not fsynced (a checkpoint is taken
//!   before every turn that writes, and syncing every object would cost more than the
//!   checkpoint): openmax killed at any point loses nothing the kernel has, and a power loss
//!   can lose the last objects written. So an object is only taken as present when its length
//!   is right (one cut short is written again), and [`Store::get`] checks an object's bytes
//!   against its name: a damaged object is an error naming it, never wrong bytes restored.
//! - The store's size is kept in `size` (bytes of every object), read-modified-written under an
//!   exclusive lock of that file; a collection recounts it.
//! - Writers of objects hold `gc.lock` shared ([`Store::writing`]) while they write objects
//!   and the manifests naming them; a collection holds it exclusively, so it never deletes an
//!   object a checkpoint in progress will name.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::digest::sha256_hex;

use crate::session::perms::{private_dir_all, private_file};

/// The object store under `$OPENMAX_HOME/checkpoints`.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// Held while objects are written (a shared lock of `gc.lock`).
pub struct Writing {
    _lock: File,
}

/// Whether `s` is a full lowercase sha256 hex digest (the only names the store reads).
pub fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Store {
    /// The store of the state root `home` (nothing is created until the first write).
    pub fn new(home: &Path) -> Store {
        Store {
            root: home.join("checkpoints"),
        }
    }

    /// `$OPENMAX_HOME/checkpoints`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of the objects.
    pub fn objects(&self) -> PathBuf {
        self.root.join("objects")
    }

    /// Where the object `hash` lives.
    pub fn path_of(&self, hash: &str) -> PathBuf {
        self.objects().join(&hash[..2]).join(&hash[2..])
    }

    /// Whether the object `hash` exists.
    pub fn has(&self, hash: &str) -> bool {
        is_hash(hash) && self.path_of(hash).exists()
    }

    /// Whether the object `hash` of `len` bytes is present whole.
    fn present(&self, hash: &str, len: u64) -> bool {
        fs::metadata(self.path_of(hash)).is_ok_and(|m| m.len() == len)
    }

    /// Take the store's lock shared, for writing objects and the manifests that name them.
    pub fn writing(&self) -> io::Result<Writing> {
        let f = self.lock_file()?;
        f.lock_shared()?;
        Ok(Writing { _lock: f })
    }

    /// Take the store's lock exclusively (a collection), or `None` when a writer holds it.
    pub fn try_exclusive(&self) -> io::Result<Option<File>> {
        let f = self.lock_file()?;
        match f.try_lock() {
            Ok(()) => Ok(Some(f)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    /// Take the store's lock exclusively, waiting for writers to finish.
    pub fn exclusive(&self) -> io::Result<File> {
        let f = self.lock_file()?;
        f.lock()?;
        Ok(f)
    }

    fn lock_file(&self) -> io::Result<File> {
        private_dir_all(&self.root)?;
        private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.root.join("gc.lock"))
    }

    /// Read the object `hash`.
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        if !is_hash(hash) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{hash:?} is not an object name"),
            ));
        }
        let path = self.path_of(hash);
        let bytes = fs::read(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "checkpoint object {} is missing or unreadable: {e}",
                    path.display()
                ),
            )
        })?;
        if sha256_hex(&bytes) != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "checkpoint object {} is damaged (its bytes do not match its name)",
                    path.display()
                ),
            ));
        }
        Ok(bytes)
    }

    /// Store `bytes` (already hashed as `hash`) unless the object exists; returns the bytes
    /// added to the store (0 when it existed).
    pub fn put(&self, hash: &str, bytes: &[u8]) -> io::Result<u64> {
        let path = self.path_of(hash);
        if self.present(hash, bytes.len() as u64) {
            return Ok(0);
        }
        let dir = path.parent().unwrap_or(&self.root);
        private_dir_all(dir)?;
        let tmp = temp_name(dir);
        let result = (|| {
            let mut f = private_file().write(true).create_new(true).open(&tmp)?;
            f.write_all(bytes)?;
            fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map(|()| bytes.len() as u64)
    }

    /// Store the file at `src` as an object, reading it once: returns its hash, its size and the
    /// bytes added to the store. `admit(size)` may refuse to store a new object (a cap): then
    /// `Ok(Err(why))`, and nothing is kept.
    pub fn put_file(
        &self,
        src: &Path,
        admit: &mut dyn FnMut(u64) -> Result<(), String>,
    ) -> io::Result<Result<(String, u64, u64), String>> {
        let mut f = File::open(src)?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let hash = sha256_hex(&bytes);
        let size = bytes.len() as u64;
        if self.present(&hash, size) {
            return Ok(Ok((hash, size, 0)));
        }
        if let Err(why) = admit(size) {
            return Ok(Err(why));
        }
        let added = self.put(&hash, &bytes)?;
        Ok(Ok((hash, size, added)))
    }

    /// The store's size in bytes as last recorded (`None` when never recorded).
    pub fn recorded_size(&self) -> Option<u64> {
        fs::read_to_string(self.root.join("size"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Add `bytes` to the recorded size (or set it, counting the objects, when none is).
    pub fn add_size(&self, bytes: u64) -> io::Result<u64> {
        private_dir_all(&self.root)?;
        let mut f = private_file()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_CLOEXEC)
            .open(self.root.join("size"))?;
        f.lock()?;
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        let now = match text.trim().parse::<u64>() {
            Ok(n) if bytes == 0 => return Ok(n),
            Ok(n) => n.saturating_add(bytes),
            // Never recorded: the objects on disk, those just written included.
            Err(_) => self.count_size()?,
        };
        f.set_len(0)?;
        use std::io::Seek;
        f.seek(io::SeekFrom::Start(0))?;
        f.write_all(now.to_string().as_bytes())?;
        Ok(now)
    }

    /// Set the recorded size.
    pub fn set_size(&self, bytes: u64) -> io::Result<()> {
        crate::session::write_atomic(&self.root.join("size"), bytes.to_string().as_bytes())
    }

    /// The bytes of every object, counted on disk.
    pub fn count_size(&self) -> io::Result<u64> {
        let mut total = 0;
        for (_, _, len) in self.list()? {
            total += len;
        }
        Ok(total)
    }

    /// Every object: (hash, path, length). Temp files and foreign names are not listed.
    pub fn list(&self) -> io::Result<Vec<(String, PathBuf, u64)>> {
        let mut out = Vec::new();
        let dir = match fs::read_dir(self.objects()) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for sub in dir {
            let sub = sub?;
            let prefix = sub.file_name().to_string_lossy().to_string();
            if prefix.len() != 2 || !sub.file_type()?.is_dir() {
                continue;
            }
            for e in fs::read_dir(sub.path())? {
                let e = e?;
                let name = format!("{prefix}{}", e.file_name().to_string_lossy());
                if is_hash(&name) {
                    out.push((name, e.path(), e.metadata()?.len()));
                }
            }
        }
        Ok(out)
    }

    /// Temp files a crashed write left in the object directories.
    pub fn strays(&self) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        let Ok(dir) = fs::read_dir(self.objects()) else {
            return Ok(out);
        };
        for sub in dir.flatten() {
            let Ok(entries) = fs::read_dir(sub.path()) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(".tmp.") {
                    out.push(e.path());
                }
            }
        }
        Ok(out)
    }
}

/// Replace `path` with `bytes`: a temp file in the same directory renamed over it (no fsync:
/// a reader sees the old file or the new one; see the module doc on durability).
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    private_dir_all(dir)?;
    let tmp = temp_name(dir);
    let r = (|| {
        let mut f = private_file().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// A fresh temp file name in `dir` (`.tmp.<pid>.<n>`).
pub fn temp_name(dir: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    dir.join(format!(
        ".tmp.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_named_by_their_bytes_and_written_once() {
        let dir = crate::scratch::path("store");
        let _ = fs::remove_dir_all(&dir);
        let store = Store::new(&dir);
        let h = sha256_hex(b"hello");
        assert_eq!(store.put(&h, b"hello").unwrap(), 5);
        assert_eq!(store.put(&h, b"hello").unwrap(), 0);
        assert_eq!(store.get(&h).unwrap(), b"hello");
        assert!(store.has(&h));
        assert!(!store.has("zz"));
        assert!(store.get("../../etc/passwd").is_err());
        std::fs::write(store.path_of(&h), b"HELLO").unwrap();
        assert!(store.get(&h).unwrap_err().to_string().contains("damaged"));
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.add_size(0).unwrap(), 5);
        assert_eq!(store.add_size(7).unwrap(), 12);
        let _ = fs::remove_dir_all(&dir);
    }
}
