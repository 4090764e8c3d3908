//! The `openmax-sim` binary: fault-injection runs of the pure core outside `cargo test`.
//!
//! - `openmax-sim run [--trace] FILE...`: run each scenario file, print its wire (or, with
//!   `--trace`, every input fed and every output), each violation of the validator, the pairing
//!   checker and the turn guarantees, and a mismatch with `<name>.golden.jsonl` when one sits
//!   beside the file. Exit 1 when anything is violated.
//! - `openmax-sim explore --seed S --cases N [--jobs J] [--save DIR]`: run N generated
//!   scenarios (deterministic from S, whatever J, the worker threads: default all cores),
//!   print the shrunk counterexample of each violated property (saved as a scenario file
//!   under DIR with `--save`), and the rate. With `--coverage`, also how many cases reached
//!   each feature, fault and ending of `coverage::WANTED` (and which none did). Exit 1 on any
//!   violation or, with `--coverage`, on a wanted name no case reached.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use openmax_sim::coverage::{self, Tally};
use openmax_sim::scenario::Scenario;
use openmax_sim::{checks, driver, explore};

const USAGE: &str = "usage:
  openmax-sim run [--trace] FILE...
  openmax-sim explore [--seed S] [--cases N] [--jobs J] [--save DIR] [--coverage]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("explore") => explore_cmd(&args[1..]),
        Some("-h") | Some("--help") => {
            println!("{USAGE}");
            Ok(true)
        }
        _ => Err(USAGE.to_string()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("openmax-sim: {e}");
            ExitCode::from(2)
        }
    }
}

/// `run`: true when every file holds.
fn run(args: &[String]) -> Result<bool, String> {
    let trace = args.iter().any(|a| a == "--trace");
    let files: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if files.is_empty() {
        return Err(format!("run needs at least one scenario file\n{USAGE}"));
    }
    let mut all_ok = true;
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let sc = Scenario::from_json(&text).map_err(|e| format!("{file}: {e}"))?;
        let run = driver::run(&sc);
        println!("== {file}");
        if trace {
            print!("{}", run.listing());
        } else {
            print!("{}", run.wire_text());
        }
        let mut violations: Vec<String> = checks::check_all(&sc, &run)
            .iter()
            .map(|v| v.to_string())
            .collect();
        if let Some(golden) = golden_path(Path::new(file)) {
            if let Ok(want) = std::fs::read_to_string(&golden) {
                if want != run.wire_text() {
                    violations.push(format!("[golden] wire differs from {}", golden.display()));
                }
            }
        }
        for v in &violations {
            println!("VIOLATION {v}");
        }
        println!(
            "-- {} lines, exit {:?}, {} violations",
            run.wire().len(),
            run.exit_code,
            violations.len()
        );
        all_ok &= violations.is_empty();
    }
    Ok(all_ok)
}

/// `sim/scenarios/x.json` → `sim/scenarios/x.golden.jsonl`.
fn golden_path(file: &Path) -> Option<PathBuf> {
    let stem = file.file_stem()?.to_str()?;
    Some(file.with_file_name(format!("{stem}.golden.jsonl")))
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number\n{USAGE}")),
    }
}

/// `explore`: true when no case broke a guarantee.
fn explore_cmd(args: &[String]) -> Result<bool, String> {
    let seed: u64 = flag(args, "--seed", 0)?;
    let cases: u64 = flag(args, "--cases", 1000)?;
    let save = args
        .iter()
        .position(|a| a == "--save")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let jobs: u64 = flag(
        args,
        "--jobs",
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
    )?
    .max(1);
    let want_coverage = args.iter().any(|a| a == "--coverage");
    let started = Instant::now();
    // Phase 1, in parallel: the first failing case of each property (case k goes to worker
    // k % jobs, so the result does not depend on the number of workers).
    type Firsts = (BTreeMap<&'static str, u64>, Tally);
    let firsts: Vec<Firsts> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let started = &started;
                scope.spawn(move || {
                    let mut first: BTreeMap<&'static str, u64> = BTreeMap::new();
                    let mut tally = Tally::default();
                    let mut k = j;
                    while k < cases {
                        if j == 0 && k >= jobs && k / 100_000 != (k - jobs) / 100_000 {
                            eprintln!("… {k} cases in {:.1}s", started.elapsed().as_secs_f64());
                        }
                        let (sc, live) = explore::case(seed, k);
                        let (violations, run) = explore::check_run(&sc, live);
                        for v in violations {
                            first.entry(v.property).or_insert(k);
                        }
                        if want_coverage {
                            tally.add(&coverage::observe(&sc, &run));
                        }
                        k += jobs;
                    }
                    (first, tally)
                })
            })
            .collect();
        handles
            .into_iter()
            // A worker only panics on a broken invariant of the checks: surface it.
            .map(|h| h.join().expect("explore worker panicked"))
            .collect()
    });
    let mut first: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut tally = Tally::default();
    for (m, t) in firsts {
        tally.merge(&t);
        for (p, k) in m {
            let e = first.entry(p).or_insert(k);
            *e = (*e).min(k);
        }
    }
    let mut order: Vec<(u64, &'static str)> = first.iter().map(|(p, k)| (*k, *p)).collect();
    order.sort();
    // Phase 2: shrink and print each, in case order.
    let failed_props: Vec<&'static str> = order.iter().map(|(_, p)| *p).collect();
    for (k, property) in order {
        let (sc, live) = explore::case(seed, k);
        {
            let small = explore::shrink_failure(&sc, live, property);
            let small_violations: Vec<String> = explore::check(&small, live)
                .iter()
                .filter(|x| x.property == property)
                .map(|x| x.to_string())
                .collect();
            println!(
                "== counterexample for {} (seed {seed}, case {k}, shrunk from {} to {} steps)",
                property,
                sc.steps.len(),
                small.steps.len()
            );
            println!("{}", small.to_json_pretty());
            print!("{}", driver::run(&small).listing());
            for sv in &small_violations {
                println!("VIOLATION {sv}");
            }
            if let Some(dir) = &save {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                let path = dir.join(format!("{}-seed{seed}-case{k}.json", property));
                std::fs::write(&path, small.to_json_pretty() + "\n")
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                println!("saved {}", path.display());
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let mut missing = Vec::new();
    if want_coverage {
        print!("{}", tally.report());
        missing = tally.missing();
        if !missing.is_empty() {
            println!("never reached: {}", missing.join(", "));
        }
    }
    println!(
        "explored {cases} cases from seed {seed} in {secs:.1}s ({:.0} cases/s): {} properties violated{}",
        cases as f64 / secs.max(1e-9),
        failed_props.len(),
        if failed_props.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed_props.join(", "))
        }
    );
    Ok(failed_props.is_empty() && missing.is_empty())
}
