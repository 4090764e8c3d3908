//! Benchmark: `--continue` on a 1 GB session record.
//!
//! `session_resume [DIR] [--gb N] [--rebuild]` builds (once) a session record of about N GB
//! (default 1) under DIR (default `$TMPDIR/openmax-bench-session`) through `SessionWriter`,
//! made of realistic turns (user prompts, assistant text with tool calls, tool results of 4 to
//! 32 KiB) with a compaction point near the end, then re-runs itself to time `resume_latest`
//! in a fresh process and print the time and the peak RSS (VmHWM) against the context loaded.
//! Run it with `bench/session_resume` (release build).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use openmax_core::conversation::{Block, Message, Role};
use openmax_core::record::Record;
use openmax_shell::session::{resume_latest, Home, ProjectState, SessionWriter};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--resume-child") {
        resume_child(Path::new(&args[2]));
        return;
    }
    let mut dir = std::env::temp_dir().join("openmax-bench-session");
    let mut gb = 1.0f64;
    let mut rebuild = false;
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--gb" => {
                i += 1;
                gb = args[i].parse().expect("--gb takes a number");
            }
            "--rebuild" => rebuild = true,
            other => dir = PathBuf::from(other),
        }
        i += 1;
    }
    let target = (gb * (1u64 << 30) as f64) as u64;
    let state = state_at(&dir);
    let record = state.sessions_dir().join("bench.jsonl");
    let have = std::fs::metadata(&record).map(|m| m.len()).unwrap_or(0);
    if rebuild || have < target {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("proj")).expect("bench dir");
        build(&state, target);
    }
    let len = std::fs::metadata(&record).expect("record").len();
    println!(
        "record: {} ({:.2} GiB)",
        record.display(),
        len as f64 / (1u64 << 30) as f64
    );
    // Resume in a fresh process so its peak RSS is the resume's alone. Three runs (warm cache).
    for run in 1..=3 {
        let out = Command::new(std::env::current_exe().expect("own exe"))
            .args(["--resume-child", &dir.to_string_lossy()])
            .output()
            .expect("resume child runs");
        assert!(
            out.status.success(),
            "resume child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        print!("run {run}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

fn state_at(dir: &Path) -> ProjectState {
    ProjectState::open(&Home::new(dir.join("home")), &dir.join("proj"))
}

/// Time `resume_latest` and report peak RSS.
fn resume_child(dir: &Path) {
    let state = state_at(dir);
    let before = vm("VmHWM");
    let t0 = Instant::now();
    let r = resume_latest(&state).expect("resume");
    let elapsed = t0.elapsed();
    let after = vm("VmHWM");
    let history_bytes: usize = r
        .history
        .iter()
        .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
        .sum();
    let transcript_json = r.transcript.to_json().len();
    println!(
        "resume_latest {:.1} ms; peak RSS {:.1} MiB (process before resume {:.1} MiB); \
         history {} messages = {:.1} MiB of JSON; transcript {} messages, {:.0} KiB line, truncated {}; notices {}",
        elapsed.as_secs_f64() * 1000.0,
        after as f64 / 1024.0,
        before as f64 / 1024.0,
        r.history.len(),
        history_bytes as f64 / (1 << 20) as f64,
        r.transcript.messages.len(),
        transcript_json as f64 / 1024.0,
        r.transcript.truncated,
        r.notices.len()
    );
}

/// A `/proc/self/status` field in KiB.
fn vm(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)
                .and_then(|r| r.trim_start_matches(':').split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

use openmax_core::rng::SplitMix64 as Rng;

/// Text of `min` plus up to `spread` bytes.
fn text(rng: &mut Rng, min: usize, spread: u64) -> String {
    let len = min + (rng.next_u64() % spread.max(1)) as usize;
    const WORDS: [&str; 12] = [
        "the ",
        "fn ",
        "session ",
        "record ",
        "let ",
        "x = ",
        "compaction ",
        "tool ",
        "é ",
        "result\n",
        "{ ",
        "} ",
    ];
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        s.push_str(WORDS[(rng.next_u64() % WORDS.len() as u64) as usize]);
    }
    s
}

/// One turn: a prompt, then tool rounds, then an answer.
fn turn(rng: &mut Rng, n: u64) -> Vec<Record> {
    let mut out = vec![Record::Message {
        message: Message::user_text(format!("prompt {n}: {}", text(rng, 200, 1800))),
    }];
    for c in 0..(1 + rng.next_u64() % 4) {
        let id = format!("call_{n}_{c}");
        out.push(Record::Message {
            message: Message {
                role: Role::Assistant,
                content: vec![
                    Block::Thinking {
                        text: text(rng, 300, 1),
                        signature: Some("sig".repeat(20)),
                    },
                    Block::text(text(rng, 100, 400)),
                    Block::ToolUse {
                        id: id.clone(),
                        name: "read_file".to_string(),
                        input: serde_json::json!({"path": format!("src/f{n}.rs")}),
                    },
                ],
            },
        });
        out.push(Record::Message {
            message: Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    id,
                    ok: true,
                    output: text(rng, 4096, 28_672),
                }],
            },
        });
    }
    out.push(Record::Message {
        message: Message::assistant_text(format!("answer {n}: {}", text(rng, 300, 3000))),
    });
    out.push(Record::TurnEnd {
        stop_reason: "stop".into(),
        turn: None,
    });
    out
}

fn build(state: &ProjectState, target: u64) {
    let t0 = Instant::now();
    let mut w = SessionWriter::create(
        state,
        "bench",
        Record::Session {
            session_id: "bench".to_string(),
            project: "/bench".to_string(),
            system: "You are a coding agent.".to_string(),
            tools: vec![],
        },
    )
    .expect("create");
    let mut rng = Rng::new(42);
    let mut written = 0u64;
    let mut n = 0u64;
    let tail_turns = 40;
    // Everything up to ~the target in 8 MiB appends, then a compaction, then a few turns.
    while written + (4 << 20) < target {
        let mut batch = Vec::new();
        let mut size = 0usize;
        while size < (8 << 20) {
            for r in turn(&mut rng, n) {
                size += serde_json::to_string(&r).map(|s| s.len()).unwrap_or(0);
                batch.push(r);
            }
            n += 1;
        }
        w.append(&batch).expect("append");
        written += size as u64;
    }
    let summary: Vec<Message> = (0..40)
        .flat_map(|i| {
            [
                Message::user_text(format!("earlier prompt {i}: {}", text(&mut rng, 500, 1))),
                Message::assistant_text(format!("earlier answer {i}: {}", text(&mut rng, 2000, 1))),
            ]
        })
        .collect();
    w.append(&[Record::Compaction {
        messages: summary,
        tokens_before: 180_000,
        tokens_after: 40_000,
        compacted_messages: n * 6,
    }])
    .expect("compaction");
    for _ in 0..tail_turns {
        w.append(&turn(&mut rng, n)).expect("append");
        n += 1;
    }
    drop(w);
    println!("built {n} turns in {:.1} s", t0.elapsed().as_secs_f64());
}
