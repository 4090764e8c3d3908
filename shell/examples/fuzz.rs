//! The long run of the mutation fuzzers (`tests/fuzz/targets.rs`): `fuzz [INPUTS] [SEED]` runs
//! every target for INPUTS mutated inputs (default 1,000,000) and prints, per target, the
//! inputs tried, the failures found and the rate; exits 1 when anything failed. Run by
//! `bench/fuzz.sh`.

#[path = "../tests/fuzz/targets.rs"]
mod targets;

use std::time::Instant;

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let inputs: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    // A failing input is reported once with the property's message; the panic hook's own
    // print would repeat it for every catch.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failed = false;
    println!(
        "{:<28} {:>10} {:>8} {:>12}",
        "target", "inputs", "failures", "inputs/s"
    );
    for target in targets::targets() {
        let start = Instant::now();
        let report = targets::run(&target, inputs, seed);
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{:<28} {:>10} {:>8} {:>12.0}",
            target.name,
            report.inputs,
            report.failures.len(),
            report.inputs as f64 / secs.max(1e-9)
        );
        for f in &report.failures {
            eprintln!("{f}");
        }
        failed |= !report.failures.is_empty();
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
