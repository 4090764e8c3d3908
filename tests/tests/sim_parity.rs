//! The same hand-written sim scenarios (`sim/scenarios/*.json`) run through the pure core (the
//! simulator's driver) and through the real binary over loopback HTTP (the mock serving the same
//! scripts) give the same event sequence, timing-free fields compared.
//!
//! Which scenarios qualify: those that need only what a real process can reproduce exactly:
//! no scripted tools or hooks (the binary runs the real tools), no injected disk faults or
//! crashes, the default `ask` mode, and every client line written at a point where the pure run
//! had nothing in flight (no stream open, no backoff pending), so the binary's interleaving
//! cannot differ by scheduling. Each client line is written once the binary has emitted as many
//! events as the pure run had when that line was fed. Every other scenario is listed as skipped
//! with its reason; the test fails if fewer than a floor of scenarios qualify, so it cannot
//! silently compare nothing.
//!
//! Compared per event: the type, and the timing-free content fields (`token`/`thinking`/
//! `message_done` text, `retry` attempt and budget, `done` stop reason, `approval_mode` mode,
//! `approval_settled` outcome). Not compared: `usage` lines (the mock reports an estimated usage
//! when a script has none, the pure driver reports none), `budget` figures (the binary's prompt
//! and tool schemas differ from the simulator's), `error` and `protocol_error` wording.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use openmax_core::machine::{Effect, FramingFault, Input, Output};
use openmax_core::provider::ProviderItem;
use openmax_core::wire::{Event, Mode};
use openmax_sim::driver::{self, FedInput, Run};
use openmax_sim::scenario::{Action, Scenario};
use openmax_tests::*;
use serde_json::Value;

/// One client input of the pure run and how many events preceded it.
#[derive(Debug, Clone)]
enum ClientInput {
    Line(String),
    TooLong(u64),
    NotUtf8,
    Eof,
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .join("sim/scenarios")
}

/// Why a scenario cannot run identically through the binary, or `None`.
fn ineligible(sc: &Scenario) -> Option<String> {
    let c = &sc.config;
    if !sc.tools.is_empty() || !sc.hooks.is_empty() || !c.hooks.is_empty() {
        return Some("scripted tools or hooks".into());
    }
    if !sc.persist_failures.is_empty()
        || !sc.mode_save_failures.is_empty()
        || !sc.approval_record_failures.is_empty()
    {
        return Some("injected disk faults".into());
    }
    if !sc.refreezes.is_empty() {
        return Some("scripted refreezes".into());
    }
    if c.non_interactive || c.mode != Mode::Ask || !c.deny.is_empty() || !c.ask.is_empty() {
        return Some("non-default mode, rules or -p".into());
    }
    if c.limits.max_agent_tokens != 0 || c.limits.approval_timeout_ms != 0 {
        return Some("token or approval limits depend on the prompt size or timing".into());
    }
    let has_call = sc.replies.iter().any(|r| match r {
        Reply::Stream { items, .. } => items
            .iter()
            .any(|i| matches!(i, StreamItem::ToolCall { .. })),
        _ => false,
    });
    if has_call {
        return Some("tool calls (real tools answer differently)".into());
    }
    if sc.replies.iter().any(|r| matches!(r, Reply::Unreachable)) {
        // The mock accepts and resets (a transport failure after connecting); it cannot refuse
        // a connection, so the three-unreachable rule is tested against a closed port instead
        // (providers.rs, connection_refused_gives_up).
        return Some("unreachable replies (the mock cannot refuse a connection)".into());
    }
    for s in &sc.steps {
        match &s.action {
            Action::Crash { .. } | Action::Heal => return Some("crash or heal steps".into()),
            Action::ApprovePending { .. } | Action::ApproveSettled => {
                return Some("approval steps".into())
            }
            Action::Framing {
                fault: FramingFault::TooLong { len },
            } if *len > 16 << 20 => return Some("a framing fault too long to send".into()),
            _ => {}
        }
    }
    None
}

/// The client inputs of the pure run, each with the event count before it; `Err` when one was
/// fed while something was in flight.
fn client_inputs(run: &Run) -> Result<Vec<(usize, ClientInput)>, String> {
    let mut out = Vec::new();
    let mut events = 0usize;
    let mut in_flight: BTreeSet<(u64, u32)> = BTreeSet::new();
    let mut backoff = false;
    for f in &run.trace {
        let client = match &f.input {
            FedInput::Core(Input::Line(l)) => Some(ClientInput::Line(l.clone())),
            FedInput::Core(Input::Framing(FramingFault::TooLong { len })) => {
                Some(ClientInput::TooLong(*len))
            }
            FedInput::Core(Input::Framing(FramingFault::NotUtf8)) => Some(ClientInput::NotUtf8),
            FedInput::Core(Input::EndOfInput) => Some(ClientInput::Eof),
            FedInput::Core(Input::Provider {
                request,
                attempt,
                item,
            }) => {
                if matches!(
                    item,
                    ProviderItem::Completed { .. }
                        | ProviderItem::EndedWithoutCompletion { .. }
                        | ProviderItem::Failed { .. }
                ) {
                    in_flight.remove(&(*request, *attempt));
                }
                None
            }
            FedInput::Core(Input::RequestFailed {
                request, attempt, ..
            }) => {
                in_flight.remove(&(*request, *attempt));
                None
            }
            FedInput::Core(_) | FedInput::Timer { .. } => None,
        };
        if let Some(c) = client {
            if !in_flight.is_empty() || backoff {
                return Err("a client line arrives while a request is in flight".into());
            }
            out.push((events, c));
        }
        for o in &f.outputs {
            match o {
                Output::Event(e) => {
                    events += 1;
                    if matches!(e, Event::Retry { .. }) {
                        backoff = true;
                    }
                }
                Output::Effect(Effect::SendRequest {
                    request, attempt, ..
                }) => {
                    backoff = false;
                    in_flight.insert((*request, *attempt));
                }
                Output::Effect(Effect::CancelRequest { request }) => {
                    in_flight.retain(|(r, _)| r != request);
                }
                Output::Effect(_) => {}
            }
        }
    }
    Ok(out)
}

/// The timing-free view of one event line (`None` for lines not compared).
fn essence(v: &Value) -> Option<String> {
    let ty = v["type"].as_str().unwrap_or("?");
    if ty == "usage" {
        return None;
    }
    let keep: &[&str] = match ty {
        "token" | "thinking" | "message_done" => &["text"],
        "retry" => &["attempt", "max_attempts"],
        "done" => &["stop_reason"],
        "approval_mode" => &["mode"],
        "approval_settled" => &["outcome"],
        _ => &[],
    };
    let mut s = ty.to_string();
    for k in keep {
        s.push(' ');
        s.push_str(&v[*k].to_string());
    }
    Some(s)
}

fn flavor_name(f: Flavor) -> &'static str {
    match f {
        Flavor::Anthropic => "anthropic",
        Flavor::Openai => "openai",
        Flavor::OpenaiChat => "openai-chat",
    }
}

/// Run one scenario through the binary; returns the events' essences and the exit code.
fn through_binary(
    sc: &Scenario,
    inputs: &[(usize, ClientInput)],
    total: usize,
) -> (Vec<String>, Option<i32>) {
    let c = &sc.config;
    let mut env = TestEnv::new();
    // A Retry-After the binary honors (1..=60 s) only decides the wait's length, not the wire:
    // serve it as 1 s. Longer ones must stay (they fail the request at once).
    let replies = sc
        .replies
        .iter()
        .cloned()
        .map(|r| match r {
            Reply::Status {
                status,
                retry_after: Some(ra),
                error,
                message,
            } if ra.parse::<u64>().is_ok_and(|n| (2..=60).contains(&n)) => Reply::Status {
                status,
                retry_after: Some("1".into()),
                error,
                message,
            },
            other => other,
        })
        .collect();
    let mock = MockServer::start(replies);
    let max_delay = sc
        .replies
        .iter()
        .map(|r| match r {
            Reply::Stream { delay_ms, .. } => *delay_ms,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    // The wire does not depend on the wait lengths, only on which timer fires: keep backoff
    // tiny and the idle timeout short but well above any scripted gap between items.
    // A scenario in which no idle timer fires gets a long one, so a loaded machine's slow first
    // byte is never taken for a stall (seen as an extra `retry` under a parallel test run).
    let stalls = sc.replies.iter().any(|r| match r {
        Reply::Stream { end, delay_ms, .. } => {
            matches!(end, StreamEnd::Stall) || *delay_ms >= c.retry.stream_idle_timeout_ms
        }
        _ => false,
    });
    let idle_ms = if stalls {
        c.retry.stream_idle_timeout_ms.min(500.max(4 * max_delay))
    } else {
        c.retry.stream_idle_timeout_ms.min(30_000)
    };
    let base = match c.flavor {
        Flavor::Anthropic => mock.base_url(),
        Flavor::Openai | Flavor::OpenaiChat => format!("{}/v1", mock.base_url()),
    };
    env.user_config(&format!(
        "[provider]\nname = \"{}\"\nmodel = \"m\"\nbase_url = \"{base}\"\napi_key_env = \"{KEY_VAR}\"\n\
         max_attempts = {}\nretry_base_ms = 1\nstream_idle_timeout_s = {}\ncontext_tokens = {}\n\
         [limits]\nmax_iterations = {}\n",
        flavor_name(c.flavor),
        c.retry.max_attempts,
        idle_ms as f64 / 1000.0,
        c.context_tokens,
        c.limits.max_iterations,
    ));
    if c.trusted {
        env.trust();
    }
    if c.agent_spawned {
        env.env
            .push(("OPENMAX_AGENT_SESSION".into(), "parent".into()));
    }
    let mut s = env.stdio(&[]);
    let mut got: Vec<Value> = Vec::new();
    let mut closed = false;
    for (before, input) in inputs {
        while got.len() < *before {
            got.push(s.event());
        }
        match input {
            ClientInput::Line(l) => {
                let mut b = l.clone().into_bytes();
                b.push(b'\n');
                s.send_bytes(&b);
            }
            ClientInput::TooLong(len) => {
                let mut b = vec![b'x'; *len as usize];
                b.push(b'\n');
                s.send_bytes(&b);
            }
            ClientInput::NotUtf8 => s.send_bytes(b"\xff\xfe\n"),
            ClientInput::Eof => {
                closed = true;
                break;
            }
        }
    }
    let code = if closed {
        let (code, rest, _) = s.finish();
        got.extend(rest);
        code
    } else {
        while got.len() < total {
            got.push(s.event());
        }
        s.finish();
        None
    };
    (got.iter().filter_map(essence).collect(), code)
}

#[test]
fn hand_written_scenarios_give_the_same_events_through_the_binary() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("sim/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && !p.to_string_lossy().ends_with(".golden.jsonl")
        })
        .collect();
    files.sort();
    let mut compared = Vec::new();
    let mut skipped = Vec::new();
    let mut jobs = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let sc = Scenario::from_json(&std::fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(why) = ineligible(&sc) {
            skipped.push(format!("{name}: {why}"));
            continue;
        }
        let run = driver::run(&sc);
        let inputs = match client_inputs(&run) {
            Ok(i) => i,
            Err(why) => {
                skipped.push(format!("{name}: {why}"));
                continue;
            }
        };
        let pure: Vec<String> = run
            .wire()
            .iter()
            .skip(1)
            .filter_map(|l| essence(&serde_json::from_str(l).unwrap()))
            .collect();
        let total = run.wire().len() - 1;
        compared.push(name.clone());
        jobs.push((name, sc, inputs, pure, total, run.exit_code));
    }
    // The binaries mostly wait on loopback I/O: run them a few at a time.
    let mut failures = Vec::new();
    for chunk in jobs.chunks(6) {
        let results: Vec<Option<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(name, sc, inputs, pure, total, exit)| {
                    scope.spawn(move || {
                        let (bin, code) = through_binary(sc, inputs, *total);
                        if &bin != pure {
                            Some(format!(
                                "{name}: events differ\n  pure:   {pure:?}\n  binary: {bin:?}"
                            ))
                        } else if code.is_some() && exit.is_some() && code != *exit {
                            Some(format!(
                                "{name}: exit code {code:?} through the binary, {exit:?} in the pure run"
                            ))
                        } else {
                            None
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r,
                    Err(_) => Some("a scenario thread panicked (see above)".into()),
                })
                .collect()
        });
        failures.extend(results.into_iter().flatten());
    }
    eprintln!("compared {}: {}", compared.len(), compared.join(", "));
    eprintln!("skipped {}:\n  {}", skipped.len(), skipped.join("\n  "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        compared.len() >= 15,
        "only {} scenarios qualified: {compared:?}",
        compared.len()
    );
}
