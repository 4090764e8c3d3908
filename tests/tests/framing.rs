//! stdin framing through the real binary: a 1 GiB line is skipped with memory bounded, and the
//! session keeps working after it.

use openmax_tests::*;

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
}

#[test]
fn a_1_gib_line_does_not_grow_memory_past_the_cap() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("after the flood")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    let pid = s.pid();
    let Some(before) = vm_hwm_kib(pid) else {
        eprintln!("no /proc here: skipping the RSS measurement");
        return;
    };
    let chunk = vec![b'y'; 1 << 20];
    for _ in 0..1024 {
        s.send_bytes(&chunk);
    }
    s.send_bytes(b"\n");
    let pe = s.event();
    assert_eq!(pe["type"], "protocol_error", "{pe}");
    let after = vm_hwm_kib(pid).expect("the process is alive");
    let grown_mib = after.saturating_sub(before) / 1024;
    // The cap is 8 MiB; allow a few MiB for pipe buffers and allocator slack.
    assert!(
        grown_mib <= 8 + 6,
        "peak RSS grew by {grown_mib} MiB for a 1 GiB line"
    );
    s.user("still there?");
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "after the flood");
    assert_eq!(s.finish().0, Some(0));
}
