//! The quick run of the mutation fuzzers (`fuzz/targets.rs`): a few thousand seeded inputs per
//! target, no timing; `bench/fuzz.sh` runs each for a million or more.

#[path = "fuzz/targets.rs"]
mod targets;

#[test]
fn every_fuzz_target_holds_its_property_on_seeded_mutations() {
    let mut failures = Vec::new();
    for target in targets::targets() {
        for input in &target.corpus {
            let mut rng = targets::Rng::new(7);
            if let Err(e) = (target.check)(&mut rng, input) {
                failures.push(format!("{} on its own seed: {e}", target.name));
            }
        }
        let report = targets::run(&target, 3_000, 0x5eed);
        assert_eq!(report.inputs, 3_000);
        failures.extend(report.failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_seed_corpora_are_valid_inputs() {
    for target in targets::targets() {
        for input in &target.corpus {
            let text = String::from_utf8_lossy(input);
            match target.name {
                "config parser" => {
                    let path = std::path::Path::new("/fuzz/config.toml");
                    if let Err(e) = openmax_shell::config::parse_file(path, &text, false) {
                        panic!("config seed does not parse: {}\n{text}", e.0);
                    }
                }
                "session record reader" => {
                    if let Err(e) = openmax_shell::session::line::parse_line(input) {
                        panic!("record seed does not parse: {}\n{text}", e.message());
                    }
                }
                "stdin framing + commands" => {
                    let line = text.lines().next().unwrap();
                    let parsed = openmax_core::wire::Command::parse_line(line);
                    assert!(matches!(parsed, Ok(Some(_))), "{line}: {parsed:?}");
                }
                _ => {}
            }
        }
    }
}
