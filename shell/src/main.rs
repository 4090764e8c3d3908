//! The `openmax` binary entry point: the sandbox helper when started as one, else parse the
//! flags, run, exit with the code.
//!
//! `std::process::exit` is used deliberately: the stdin reader thread may be blocked in a read
//! and must not keep the process alive after the session is over.

use clap::Parser;

fn main() {
    // Started as the sandbox helper (`--sandbox-exec`): it never returns.
    openmax_shell::sandbox::helper::dispatch();
    // Before any thread exists: the provider key out of this process's environment block.
    openmax_shell::sandbox::scrub::take(&openmax_shell::sandbox::scrub::key_names());
    let cli = openmax_shell::app::cli::Cli::parse();
    let code = openmax_shell::app::run(cli);
    std::process::exit(code);
}
