//! The `openmax` binary entry point: the sandbox helper when started as one, else parse the
//! flags, run, exit with the code (a wrong command line: 64, `EX_USAGE`; see `exit`).
//!
//! `std::process::exit` is used deliberately: the stdin reader thread may be blocked in a read
//! and must not keep the process alive after the session is over.

fn main() {
    // Started as the sandbox helper (`--sandbox-exec`): it never returns.
    openmax_shell::sandbox::helper::dispatch();
    // Before any thread exists: the provider key out of this process's environment block.
    openmax_shell::sandbox::scrub::take(&openmax_shell::sandbox::scrub::key_names());
    let cli = match openmax_shell::app::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` come this way too, on stdout with 0.
            let _ = e.print();
            std::process::exit(openmax_shell::app::cli::error_code(&e));
        }
    };
    let code = openmax_shell::app::run(cli);
    // The sessions' private temp directories, even one a leftover task still holds.
    openmax_shell::sandbox::temps::remove_all();
    std::process::exit(code);
}
