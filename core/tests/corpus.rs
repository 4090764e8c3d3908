//! The stream corpus: every `corpus/invalid/*.jsonl` must fail with the rule its `.expect`
//! sidecar names (`<line>: <substring>` or `end: <substring>`), every `corpus/valid/*.jsonl`
//! must pass, and the valid streams together must cover every line type.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use openmax_core::validate::schema::{check_against, stdio_schema};
use openmax_core::validate::{StreamValidator, Violation, Where};
use openmax_core::wire::event::EVENT_FIELDS;

fn corpus(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("corpus directory exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

/// Split on `\n` as `--check` frames lines (a final newline ends the last line).
fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

fn validate(bytes: &[u8]) -> Vec<Violation> {
    let mut v = StreamValidator::new();
    let mut out = Vec::new();
    for l in lines(bytes) {
        out.extend(v.feed(l).violations);
    }
    out.extend(v.finish());
    out
}

#[test]
fn every_invalid_stream_fails_with_its_named_rule_at_its_line() {
    let files = corpus("invalid");
    assert!(files.len() >= 40, "only {} invalid streams", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("readable");
        let expect = std::fs::read_to_string(path.with_extension("expect"))
            .unwrap_or_else(|_| panic!("{} has no .expect sidecar", path.display()));
        let expect = expect.trim();
        let (at, rule) = expect.split_once(": ").expect("expect is `<line>: <rule>`");
        let at = match at {
            "end" => Where::End,
            n => Where::Line(n.parse().expect("line number")),
        };
        let found = validate(&bytes);
        if !found.iter().any(|v| v.at == at && v.message.contains(rule)) {
            failures.push(format!(
                "{}: expected {expect:?}, found:\n  {}",
                path.display(),
                found
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_valid_stream_passes_and_each_line_fits_the_schema() {
    let files = corpus("valid");
    assert!(files.len() >= 10, "only {} valid streams", files.len());
    let schema = stdio_schema();
    for path in &files {
        let bytes = std::fs::read(path).expect("readable");
        let found = validate(&bytes);
        assert!(
            found.is_empty(),
            "{}: {}",
            path.display(),
            found
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        for (i, l) in lines(&bytes).into_iter().enumerate() {
            let value: serde_json::Value = serde_json::from_slice(l).expect("valid JSON");
            if let Err(e) = check_against(&schema, "stdout_line", &value) {
                panic!("{} line {}: schema: {e}", path.display(), i + 1);
            }
        }
    }
}

#[test]
fn valid_streams_cover_every_line_type() {
    let mut seen = BTreeSet::new();
    for path in corpus("valid") {
        let bytes = std::fs::read(&path).expect("readable");
        for l in lines(&bytes) {
            let value: serde_json::Value = serde_json::from_slice(l).expect("valid JSON");
            seen.insert(value["type"].as_str().expect("type").to_string());
        }
    }
    let mut want: BTreeSet<String> = EVENT_FIELDS.iter().map(|s| s.type_name.into()).collect();
    want.insert("hello".into());
    want.insert("transcript".into());
    let missing: Vec<_> = want.difference(&seen).collect();
    assert!(missing.is_empty(), "no valid stream shows {missing:?}");
}

#[test]
fn invalid_lines_that_parse_also_fail_the_schema_where_it_can_say() {
    // The schema states shapes only; line-shape cases must be rejected by it too.
    let schema = stdio_schema();
    let shape_cases = [
        r#"{"session_id":"s1","type":"tool_end","call_id":"c1","ok":"true","output":""}"#,
        r#"{"session_id":"s1","type":"token","text":"x","delta":"x"}"#,
        r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"n","summary":"","detail":"","reason":"unapproved_source","source_path":"t","source_sha":"ABCDEF123456"}"#,
        r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"n","summary":"","detail":"","reason":"gate","source_path":"t","source_sha":""}"#,
        r#"{"session_id":"s1","type":"done","stop_reason":""}"#,
        r#"{"session_id":"s1","type":"protocol_error","message":"x"}"#,
        r#"{"type":"approval_mode","mode":"yolo"}"#,
        r#"{"session_id":"s1","type":"usage","prompt_tokens":1,"completion_tokens":1,"cached_tokens":"0"}"#,
        r#"{"type":"hello","proto":"openmax-stdio/5","protocol_version":6,"session_id":"s","version":"0.2.0","project":"/p","continued":false}"#,
        r#"{"session_id":"s1","type":"done"}"#,
        r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"n","summary":"","detail":"","reason":"gate","source_path":"","source_sha":"","env":[]}"#,
        r#"{"session_id":"s1","type":"retry","attempt":1,"max_attempts":3,"reason":"r"}"#,
        r#"{"session_id":"s1","type":"refrozen","tools":[],"skills":[],"changes":[{"kind":"plugin","name":"n","change":"added","path":"p","by":"agent"}]}"#,
        r#"{"type":"transcript","session_id":"s1","messages":[{"role":"system","content":"x"}],"truncated":false}"#,
        r#"{"session_id":"s1","type":"nonsense"}"#,
    ];
    for case in shape_cases {
        let value: serde_json::Value = serde_json::from_str(case).expect("valid JSON");
        assert!(
            check_against(&schema, "stdout_line", &value).is_err(),
            "schema accepted {case}"
        );
    }
}
