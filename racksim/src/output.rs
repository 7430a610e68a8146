//! Every file racksim writes goes through here (issue 39): the content goes
//! to a temporary file beside the target (same directory, so the rename is
//! atomic) and is renamed into place only when it is complete. An argument
//! error, a failed run or an interrupt leaves an existing file as it was.
//!
//! Temporaries are named `.NAME.racksim-XXXXXX.tmp`, so that one left by a
//! `kill -9` is plainly racksim's. On SIGINT a handler (installed with the
//! first temporary) removes the live ones before the process exits: without
//! it the default disposition would end the process before any destructor
//! ran.

use std::{
    collections::BTreeSet,
    io::Write,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    sync::{Mutex, Once},
};

use tempfile::NamedTempFile;

/// The temporaries that exist now. Creating, persisting and removing one
/// all happen under this lock, and so does the SIGINT handler's cleanup:
/// a temporary is never both renamed into place and removed, nor left
/// unlisted while it exists.
static LIVE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // A panic elsewhere while holding the lock leaves the set itself whole.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// An output file being written: `flag` (e.g. `--report`) names it in
/// errors. Dropped without [`Output::commit`], it removes its temporary and
/// leaves the target untouched.
pub struct Output {
    flag: &'static str,
    path: PathBuf,
    tmp: Option<std::io::BufWriter<NamedTempFile>>,
}

impl Output {
    /// Starts writing `path`: checks that it can be written and creates the
    /// temporary beside it. Called before a run, it makes a bad path an
    /// argument error that touches nothing.
    pub fn create(flag: &'static str, path: &Path) -> Result<Output, String> {
        let err = |what: String| format!("error: {flag} {}: {what}", path.display());
        let dir = parent(path);
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(err(format!("{} is not a directory", dir.display()))),
            Err(e) => {
                return Err(err(format!(
                    "directory {}: {e} (create it first, or write elsewhere)",
                    dir.display()
                )))
            }
        }
        // An existing file keeps its mode; a new one gets 0666 less the
        // umask, as File::create would give it (a temporary is 0600).
        let mode = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(err("is a directory; name a file".into())),
            Ok(m) => m.permissions().mode() & 0o7777,
            Err(_) => 0o666,
        };
        let name = path
            .file_name()
            .ok_or_else(|| err("names no file".into()))?
            .to_string_lossy()
            .into_owned();
        install_interrupt_handler();
        let mut live = live();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}.racksim-"))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempfile_in(&dir)
            .map_err(|e| err(format!("cannot write in {}: {e}", dir.display())))?;
        live.insert(tmp.path().to_path_buf());
        Ok(Output {
            flag,
            path: path.to_path_buf(),
            tmp: Some(std::io::BufWriter::new(tmp)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where to write the content.
    pub fn writer(&mut self) -> &mut impl Write {
        self.tmp
            .as_mut()
            .expect("an Output is uncommitted until commit")
    }

    /// The content is complete: renames the temporary over the target.
    pub fn commit(mut self) -> Result<(), String> {
        let err = |e: &dyn std::fmt::Display| {
            format!("error: {} {}: {e}", self.flag, self.path.display())
        };
        let buf = self.tmp.take().expect("committed once");
        let tmp = buf.into_inner().map_err(|e| err(&e.error()))?;
        tmp.as_file().sync_all().map_err(|e| err(&e))?;
        let mut live = live();
        let tmp_path = tmp.path().to_path_buf();
        let result = tmp.persist(&self.path).map_err(|e| err(&e.error));
        // On error `persist` has dropped (removed) the temporary.
        live.remove(&tmp_path);
        result.map(drop)
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(buf) = self.tmp.take() {
            let mut live = live();
            let path = buf.get_ref().path().to_path_buf();
            // Removes the temporary (NamedTempFile's drop), under the lock.
            let (tmp, _) = buf.into_parts();
            drop(tmp);
            live.remove(&path);
        }
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub fn write(flag: &'static str, path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut out = Output::create(flag, path)?;
    out.writer()
        .write_all(bytes)
        .map_err(|e| format!("error: {flag} {}: {e}", path.display()))?;
    out.commit()
}

/// The directory `path` is in (`.` for a bare file name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What makes two paths the same file: an existing file's device and inode
/// (so `./a`, `a` and a link to it are one), or a file not yet there by its
/// directory's identity and its name.
#[derive(PartialEq, Eq)]
enum Identity {
    Inode(u64, u64),
    Fresh(u64, u64, std::ffi::OsString),
}

fn identity(path: &Path) -> Option<Identity> {
    if let Ok(m) = std::fs::metadata(path) {
        return Some(Identity::Inode(m.dev(), m.ino()));
    }
    let d = std::fs::metadata(parent(path)).ok()?;
    Some(Identity::Fresh(
        d.dev(),
        d.ino(),
        path.file_name()?.to_owned(),
    ))
}

/// Refuses, before anything runs, an output that is one of the inputs or
/// that another output names too. Each is `(flag, path)`; an input's flag
/// says what it is (e.g. `the scenario file`).
pub fn refuse_overlap(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<(), String> {
    for (i, (flag, path)) in outputs.iter().enumerate() {
        let Some(id) = identity(path) else { continue };
        for (what, input) in inputs {
            // Only a file that exists is an input: a catalogue name such as
            // `madrid-one-switch` names no file, and an output of that name
            // in the working directory overwrites nothing of the user's.
            let existing = identity(input).filter(|i| matches!(i, Identity::Inode(..)));
            if existing.as_ref() == Some(&id) {
                return Err(format!(
                    "error: {flag} {}: that is {what} ({}), an input of this command; \
                     write the output to another file",
                    path.display(),
                    input.display()
                ));
            }
        }
        for (other, other_path) in &outputs[..i] {
            if identity(other_path).as_ref() == Some(&id) {
                return Err(format!(
                    "error: {flag} {} and {other} {} are the same file; give each output its own",
                    path.display(),
                    other_path.display()
                ));
            }
        }
    }
    Ok(())
}

/// On SIGINT: removes the live temporaries and exits 130, as a shell
/// reports a process that SIGINT ended. Installed once, with the first
/// temporary, so that commands that write no file (`serve`, which handles
/// Ctrl-C itself) keep their own behaviour.
fn install_interrupt_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("racksim-sigint".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(_) => {
                        let _ = ready_tx.send(false);
                        return;
                    }
                };
                rt.block_on(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let Ok(mut sigint) = signal(SignalKind::interrupt()) else {
                        let _ = ready_tx.send(false);
                        return;
                    };
                    // Registered: from here on SIGINT no longer kills the
                    // process outright.
                    let _ = ready_tx.send(true);
                    sigint.recv().await;
                    let live = live();
                    for p in live.iter() {
                        let _ = std::fs::remove_file(p);
                    }
                    eprintln!("interrupted: no output file was changed");
                    // Exits holding the lock: no temporary is created or
                    // renamed into place after the cleanup.
                    std::process::exit(130);
                })
            });
        // Wait until the handler is registered, so that a SIGINT right after
        // the first temporary exists cannot leave it behind. Without a
        // handler (no thread), temporaries are still removed on error and
        // on drop.
        if spawned.is_ok() {
            let _ = ready_rx.recv();
        }
    });
}
