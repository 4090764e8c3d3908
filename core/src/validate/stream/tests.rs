//! The stream validator's own tests: the fast path agrees with the full check, arbitrary
//! input never panics, and the open-id bounds hold.

use super::*;
use quickcheck::{QuickCheck, TestResult};

const HELLO: &[u8] = br#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":false}"#;

fn after_hello() -> StreamValidator {
    let mut v = StreamValidator::new();
    assert!(v.feed(HELLO).is_ok());
    v
}

/// Whatever the fast path accepts, the full check accepts as the same line type.
fn fast_path_agrees(raw: &[u8]) -> bool {
    let v = after_hello();
    let Some(kind) = v.plain_text_line(raw) else {
        return true;
    };
    let Ok(text) = std::str::from_utf8(raw) else {
        return true; // feed rejects non-UTF-8 before the fast path
    };
    matches!(
        check_line(text),
        Ok(Parsed::Event { session_id: Some(ref s), ref event }) if s == "s1" && event.type_name() == kind
    )
}

#[test]
fn the_fast_path_accepts_only_what_the_full_check_accepts() {
    fn prop(text: String, raw_tail: Vec<u8>, kind: u8) -> TestResult {
        let kind = ["token", "thinking", "message_done"][kind as usize % 3];
        let good = format!(
            r#"{{"session_id":"s1","type":"{kind}","text":{}}}"#,
            serde_json::to_string(&text).expect("string serializes")
        );
        let mut raw = format!(r#"{{"session_id":"s1","type":"{kind}","text":""#).into_bytes();
        raw.extend_from_slice(&raw_tail);
        TestResult::from_bool(fast_path_agrees(good.as_bytes()) && fast_path_agrees(&raw))
    }
    QuickCheck::new()
        .tests(2000)
        .quickcheck(prop as fn(String, Vec<u8>, u8) -> TestResult);
    for tail in [
        &br#"a\"}"#[..],
        br#"a\\"}"#,
        br#"a\u0041"}"#,
        br#"a\x"}"#,
        br#"a"} "#,
        br#"a","x":1}"#,
        b"a\t\"}",
        br#"a\"#,
        br#"a"}}"#,
    ] {
        let mut raw = br#"{"session_id":"s1","type":"token","text":""#.to_vec();
        raw.extend_from_slice(tail);
        assert!(fast_path_agrees(&raw), "{}", String::from_utf8_lossy(&raw));
    }
}

/// Lines drawn from real shapes and then damaged: the validator reports, never panics.
#[test]
fn arbitrary_streams_never_panic_and_number_every_line() {
    const SHAPES: [&str; 12] = [
        r#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"s1","version":"0.2.0","project":"/p","continued":true}"#,
        r#"{"type":"transcript","session_id":"s1","messages":[{"role":"user","content":"hi"}],"truncated":false}"#,
        r#"{"session_id":"s1","type":"token","text":"hi"}"#,
        r#"{"session_id":"s1","type":"message_done","text":"hi"}"#,
        r#"{"session_id":"s1","type":"tool_start","call_id":"c1","name":"n","args":{}}"#,
        r#"{"session_id":"s1","type":"tool_end","call_id":"c1","ok":true,"output":""}"#,
        r#"{"session_id":"s1","type":"retry","attempt":2,"max_attempts":3,"reason":"r"}"#,
        r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"n","summary":"","detail":"","reason":"gate","source_path":"","source_sha":""}"#,
        r#"{"session_id":"s1","type":"approval_settled","approval_id":"a1","outcome":"approved"}"#,
        r#"{"session_id":"s1","type":"error","message":"e"}"#,
        r#"{"type":"protocol_error","message":"x"}"#,
        r#"{"session_id":"s1","type":"done","stop_reason":"refused"}"#,
    ];
    fn prop(picks: Vec<(u8, u16, u8)>) -> bool {
        let mut v = StreamValidator::new();
        for (i, (shape, at, byte)) in picks.iter().enumerate() {
            let mut line = SHAPES[*shape as usize % SHAPES.len()].as_bytes().to_vec();
            if *byte % 3 == 0 {
                let at = *at as usize % line.len();
                line[at] = *byte;
            } else if *byte % 3 == 1 {
                line.truncate(*at as usize % line.len());
            }
            let r = v.feed(&line);
            if r.line != i as u64 + 1 || r.violations.iter().any(|x| x.at != Where::Line(r.line)) {
                return false;
            }
        }
        let end = v.finish();
        end.iter().all(|x| x.at == Where::End)
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<(u8, u16, u8)>) -> bool);
}

#[test]
fn the_fast_path_takes_plain_text_lines() {
    let v = after_hello();
    let plain = r#"{"session_id":"s1","type":"token","text":"a \"b\" \\ \n é"}"#;
    assert_eq!(v.plain_text_line(plain.as_bytes()), Some("token"));
    let thinking = r#"{"session_id":"s1","type":"thinking","text":"x"}"#;
    assert_eq!(v.plain_text_line(thinking.as_bytes()), Some("thinking"));
    let other = r#"{"session_id":"s2","type":"token","text":"a"}"#;
    assert_eq!(v.plain_text_line(other.as_bytes()), None);
    let extra = r#"{"session_id":"s1","type":"token","text":"a","x":1}"#;
    assert_eq!(v.plain_text_line(extra.as_bytes()), None);
}

#[test]
fn open_ids_are_capped_with_one_violation() {
    let mut v = after_hello();
    let mut capped = 0;
    for i in 0..MAX_OPEN_IDS + 10 {
        let line = format!(
            r#"{{"session_id":"s1","type":"tool_start","call_id":"c{i}","name":"n","args":{{}}}}"#
        );
        let r = v.feed(line.as_bytes());
        capped += r
            .violations
            .iter()
            .filter(|x| x.message.contains("stops tracking"))
            .count();
    }
    assert_eq!(capped, 1);
    assert_eq!(v.turn.calls.len(), MAX_OPEN_IDS);
}

#[test]
fn long_ids_are_stored_as_digests() {
    let long = "x".repeat(10_000);
    assert!(id_key(&long).starts_with("sha256:"));
    assert_eq!(id_key(&long).len(), "sha256:".len() + 64);
    assert_eq!(id_key("c1"), "c1");
    let mut v = after_hello();
    let start = format!(
        r#"{{"session_id":"s1","type":"tool_start","call_id":"{long}","name":"n","args":{{}}}}"#
    );
    let end = format!(
        r#"{{"session_id":"s1","type":"tool_end","call_id":"{long}","ok":true,"output":""}}"#
    );
    assert!(v.feed(start.as_bytes()).is_ok());
    assert!(v.feed(end.as_bytes()).is_ok());
}
