//! The `openmax` binary entry point: parse the flags, run, exit with the code.
//!
//! `std::process::exit` is used deliberately: the stdin reader thread may be blocked in a read
//! and must not keep the process alive after the session is over.

use clap::Parser;

fn main() {
    let cli = openmax_shell::app::cli::Cli::parse();
    let code = openmax_shell::app::run(cli);
    std::process::exit(code);
}
