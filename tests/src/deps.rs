//! Real third-party components the end-to-end tests run against (MCP servers from npm and PyPI,
//! the ACP SDK's client from npm, tmux), installed on first use into a cache under `target/`.
//!
//! Invariants:
//! - One home for every pinned version: [`NPM`], [`PYPI`]. A test asks for a component by name
//!   and gets a path to run; nothing here is hard-coded to a test.
//! - Installs are idempotent and safe under parallel tests and parallel test binaries: each
//!   component installs under an exclusive file lock into a temporary directory that is renamed
//!   into place only when the install succeeded, so a half-finished install is never used.
//! - A registry that cannot be reached is a clear panic naming the component, the registry and
//!   the command that failed, never a silent skip: the suite needs these components.
//! - `openmax-test-deps` (this crate's binary, run by `.ci/run`) installs all of them up front;
//!   the tests install lazily what is missing, so `cargo test --workspace` alone works on a fresh
//!   machine.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// npm packages: (package, exact version).
pub const NPM: &[(&str, &str)] = &[
    ("@modelcontextprotocol/server-everything", "2026.8.31"),
    ("@modelcontextprotocol/server-filesystem", "2026.8.31"),
    ("@agentclientprotocol/sdk", "2.4.0"),
];

/// PyPI packages: (package, exact version).
pub const PYPI: &[(&str, &str)] = &[
    ("mcp-server-time", "2026.10.19"),
    // The official Python SDK: its streamable HTTP server can answer in JSON, not SSE.
    ("mcp", "2.3.0"),
];

/// The cache root: `target/test-deps` (next to the profile directory of this executable, or
/// under `$CARGO_TARGET_DIR`).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("OPENMAX_TEST_DEPS") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("test-deps");
    }
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test> or target/<profile>/<bin> → target
    let mut dir = exe.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if d.file_name().is_some_and(|n| n == "target") {
            return d.join("test-deps");
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    std::env::temp_dir().join("openmax-test-deps")
}

/// Hold an exclusive lock on `path` for the life of the returned file.
fn lock(path: &Path) -> File {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create the test-deps cache");
    }
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .expect("open the test-deps lock file");
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor we own; blocks until the lock is ours.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock {}", path.display());
    f
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn run(cmd: &mut Command, what: &str, registry: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("installing {what}: could not run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "installing {what} from {registry} failed ({cmd:?} exited {}). The end-to-end tests \
             need this component; check that {registry} can be reached.\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn version_of<'a>(table: &'a [(&str, &str)], name: &str) -> &'a str {
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("{name} is not in the pinned test dependencies (deps.rs)"))
}

/// The install prefix of an npm package (its `node_modules/` inside), installing it when
/// missing. Run its entry point with `node <prefix>/node_modules/<pkg>/<main>` or a bin from
/// [`npm_bin`].
pub fn npm_package(name: &str) -> PathBuf {
    let version = version_of(NPM, name);
    let root = cache_root().join("npm");
    let dir = root.join(format!("{}@{version}", slug(name)));
    let marker = dir.join(".installed");
    if marker.exists() {
        return dir;
    }
    let _guard = lock(&root.join(format!("{}.lock", slug(name))));
    if marker.exists() {
        return dir;
    }
    let tmp = root.join(format!("{}.tmp-{}", slug(name), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("create the npm install dir");
    std::fs::write(tmp.join("package.json"), "{\"private\":true}\n").expect("write package.json");
    run(
        Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                &format!("{name}@{version}"),
            ])
            .current_dir(&tmp),
        name,
        "the npm registry",
    );
    std::fs::write(tmp.join(".installed"), version).expect("write the install marker");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).expect("move the npm install into place");
    dir
}

/// A binary an npm package installs (`node_modules/.bin/<bin>`).
pub fn npm_bin(package: &str, bin: &str) -> PathBuf {
    let p = npm_package(package).join("node_modules/.bin").join(bin);
    assert!(
        p.exists(),
        "{package} installed no binary {bin} ({})",
        p.display()
    );
    p
}

/// The `bin/` directory of a virtualenv holding a PyPI package, installing it when missing.
pub fn pypi_bin_dir(name: &str) -> PathBuf {
    let version = version_of(PYPI, name);
    let root = cache_root().join("pypi");
    let dir = root.join(slug(name));
    let marker = dir.join(".installed");
    if marker.exists() {
        return dir.join("bin");
    }
    let _guard = lock(&root.join(format!("{}.lock", slug(name))));
    if marker.exists() {
        return dir.join("bin");
    }
    // A venv's scripts name its interpreter by absolute path, so it is built in place; the
    // marker, written last, is what says it is whole (a leftover without one is rebuilt).
    let _ = std::fs::remove_dir_all(&dir);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        Command::new(&python).arg("-m").arg("venv").arg(&dir),
        name,
        "python3 -m venv",
    );
    let spec = format!("{name}=={version}");
    run(
        Command::new(dir.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            &spec,
        ]),
        name,
        "PyPI",
    );
    std::fs::write(&marker, version).expect("write the install marker");
    dir.join("bin")
}

/// The path of `tmux`, installing Debian's package when it is missing (as root, with apt-get).
pub fn tmux() -> PathBuf {
    if let Some(p) = which("tmux") {
        return p;
    }
    let _guard = lock(&cache_root().join("apt.lock"));
    if let Some(p) = which("tmux") {
        return p;
    }
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "tmux is not installed and this user cannot install it: run `sudo apt-get install -y tmux`"
    );
    // A stale package list is the usual reason an install cannot find the package; a failed
    // update is reported by the install that follows.
    let _ = Command::new("apt-get").args(["update", "-q"]).output();
    run(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "tmux"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
        "tmux",
        "Debian's package archive",
    );
    which("tmux").expect("tmux is on PATH after apt-get install")
}

/// The first `name` on `$PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Install everything (for `.ci/run`, before the tests).
pub fn install_all() {
    for (name, _) in NPM {
        let dir = npm_package(name);
        println!("npm  {name}: {}", dir.display());
    }
    for (name, _) in PYPI {
        let dir = pypi_bin_dir(name);
        println!("pypi {name}: {}", dir.display());
    }
    println!("tmux: {}", tmux().display());
}

/// The entry point of the real `@modelcontextprotocol/server-everything` (run it with
/// `node <it> stdio` or `node <it> streamableHttp`), installed when missing.
pub fn everything_js() -> PathBuf {
    npm_package("@modelcontextprotocol/server-everything")
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// An HTTP MCP server on a free loopback port: server-everything in one of its HTTP modes, or
/// the Python SDK's JSON-answering server. Killed on drop.
pub struct HttpServer {
    child: std::process::Child,
    pub port: u16,
}

impl HttpServer {
    /// server-everything in its streamable HTTP mode (`/mcp`), once it listens (at most 60 s).
    pub fn everything() -> HttpServer {
        HttpServer::everything_mode("streamableHttp")
    }

    /// server-everything in `mode` (`streamableHttp`, or `sse`: the older HTTP+SSE transport at
    /// `/sse`), once it listens (at most 60 s).
    pub fn everything_mode(mode: &str) -> HttpServer {
        HttpServer::listening("server-everything", |port| {
            let mut c = std::process::Command::new("node");
            c.arg(everything_js())
                .arg(mode)
                .env("PORT", port.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            c
        })
    }

    /// `tests/mcp/sdk_json_http_server.py`: a streamable HTTP server (`/mcp`) of the official
    /// Python SDK with `json_response=True`, so every answer is one JSON body (server-everything
    /// answers in SSE); its tool `sized(n)` returns a text of `n` bytes.
    /// Its access log (one line per request: method, path, status) goes to `log`.
    pub fn python_sdk_json(log: &Path) -> HttpServer {
        let python = pypi_bin_dir("mcp").join("python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/sdk_json_http_server.py");
        let log = File::create(log).expect("create the server's log");
        HttpServer::listening("the Python SDK's server", |port| {
            let mut c = std::process::Command::new(&python);
            c.arg(&script)
                .arg(port.to_string())
                .stderr(log.try_clone().expect("log"))
                .stdout(log);
            c
        })
    }

    fn listening(what: &str, command: impl FnOnce(u16) -> std::process::Command) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = command(port)
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{what} never listened on {port}");
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{what} exited before it listened: {status}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
