//! Crash soak: a child process appends records in a loop and is killed with SIGKILL at seeded
//! random moments (at least 200 times); after each kill the session is resumed and checked:
//! the record is readable, every append the child reported as acknowledged is present, the
//! sequence numbers form an unbroken prefix, and the resumed history, prompt and mode equal an
//! independent replay of the record.
//!
//! The child is this test executable re-run with `OPENMAX_TEST_CRASH_CHILD=<dir>`. It prints
//! `acked N` after each successful append whose highest sequence number is N. Set
//! `OPENMAX_CRASH_SEED` to replay another seed, `OPENMAX_CRASH_KILLS` for more kills.

use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use openmax_core::conversation::{Message, ToolSchema};
use openmax_core::record::{Record, RecordLine};
use openmax_core::wire::Mode;
use openmax_shell::session::{resume_latest, Home, ProjectState, SessionWriter};

const CHILD_ENV: &str = "OPENMAX_TEST_CRASH_CHILD";
const TEST_NAME: &str = "crash_soak_sigkill_keeps_every_acked_append";
const KILLS_PER_SESSION: u64 = 10;

use openmax_core::rng::SplitMix64 as Rng;

fn state_at(dir: &Path) -> ProjectState {
    ProjectState::open(&Home::new(dir.join("home")), &dir.join("proj"))
}

fn header(id: &str) -> Record {
    Record::Session {
        session_id: id.to_string(),
        project: "/p".to_string(),
        system: "sys 0".to_string(),
        tools: vec![],
    }
}

fn seq_text(seq: u64, pad: usize) -> String {
    format!("seq {seq} {}", "p".repeat(pad))
}

fn seq_of(m: &Message) -> u64 {
    let t = m.plain_text();
    let rest = t.strip_prefix("seq ").expect("every message carries a seq");
    rest.split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("seq number")
}

/// The child: append batches forever, printing `acked N` after each Ok.
fn child(dir: &Path) {
    let state = state_at(dir);
    let mut seq: u64 = std::env::var("OPENMAX_TEST_CRASH_SEQ")
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("seq given");
    let mut rng = Rng::new(
        std::env::var("OPENMAX_TEST_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("seed given"),
    );
    let mut w = match std::env::var("OPENMAX_TEST_CRASH_NEW") {
        Ok(id) if !id.is_empty() => {
            SessionWriter::create(&state, &id, header(&id)).expect("create")
        }
        _ => resume_latest(&state).expect("child resumes").writer,
    };
    let mut out = std::io::stdout();
    for _ in 0..1_000_000 {
        let n = 1 + rng.below(4);
        let mut batch = Vec::new();
        for i in 0..n {
            let last = i == n - 1;
            match rng.below(20) {
                0 if !last => batch.push(Record::ModeChanged {
                    mode: [Mode::Auto, Mode::Ask, Mode::Readonly][rng.below(3) as usize],
                }),
                1 if !last => batch.push(Record::Refrozen {
                    system: format!("sys {seq}"),
                    tools: vec![ToolSchema {
                        name: format!("t{seq}"),
                        description: String::new(),
                        parameters: serde_json::json!({}),
                    }],
                }),
                2 if !last => batch.push(Record::TurnEnd {
                    stop_reason: "stop".into(),
                    turn: None,
                }),
                3 => {
                    batch.push(Record::Compaction {
                        messages: vec![Message::user_text(seq_text(seq, 10))],
                        tokens_before: 10,
                        tokens_after: 1,
                        compacted_messages: 5,
                    });
                    seq += 1;
                }
                _ => {
                    // Mostly small; sometimes large, so that a kill can tear a write.
                    let pad = if rng.below(30) == 0 {
                        32_768 + rng.below(131_072) as usize
                    } else {
                        rng.below(300) as usize
                    };
                    let text = seq_text(seq, pad);
                    batch.push(Record::Message {
                        message: if rng.below(2) == 0 {
                            Message::user_text(text)
                        } else {
                            Message::assistant_text(text)
                        },
                    });
                    seq += 1;
                }
            }
        }
        w.append(&batch).expect("append");
        writeln!(out, "acked {}", seq - 1).expect("stdout");
        out.flush().expect("stdout");
    }
}

/// An independent replay of a record, read incrementally.
struct Model {
    system: String,
    tools: Vec<ToolSchema>,
    history: Vec<Message>,
    mode: Option<Mode>,
    next_seq: u64,
    verified_len: u64,
    records: u64,
    compactions: u64,
}

impl Model {
    fn new(next_seq: u64) -> Model {
        Model {
            system: String::new(),
            tools: vec![],
            history: vec![],
            mode: None,
            next_seq,
            verified_len: 0,
            records: 0,
            compactions: 0,
        }
    }

    /// Apply the lines appended since the last check; every line must be whole and parse.
    fn catch_up(&mut self, path: &Path) {
        let mut f = fs::File::open(path).expect("record readable");
        let len = f.metadata().expect("meta").len();
        assert!(
            len >= self.verified_len,
            "record shrank below verified data: {len} < {}",
            self.verified_len
        );
        f.seek(SeekFrom::Start(self.verified_len)).expect("seek");
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).expect("read");
        assert!(
            bytes.is_empty() || bytes.ends_with(b"\n"),
            "resume left a torn tail"
        );
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let l: RecordLine = serde_json::from_slice(line).expect("every line parses");
            self.records += 1;
            match l.record {
                Record::Session { system, tools, .. } => {
                    assert_eq!(self.records, 1, "header only first");
                    self.system = system;
                    self.tools = tools;
                }
                Record::Message { message } => {
                    assert_eq!(seq_of(&message), self.next_seq, "no gaps, no repeats");
                    self.next_seq += 1;
                    self.history.push(message);
                }
                Record::Compaction { messages, .. } => {
                    assert_eq!(seq_of(&messages[0]), self.next_seq, "no gaps, no repeats");
                    self.next_seq += 1;
                    self.compactions += 1;
                    self.history = messages;
                }
                Record::Refrozen { system, tools } => {
                    self.system = system;
                    self.tools = tools;
                }
                Record::ModeChanged { mode } => self.mode = Some(mode),
                Record::TurnEnd { .. } | Record::Checkpoint { .. } => {}
            }
        }
        self.verified_len = len;
    }
}

/// The end of the line holding sequence number `acked` (searching from `from`, a line
/// boundary), or `from` when it is not after `from` or nothing was acked.
fn ack_end(path: &Path, from: u64, acked: Option<u64>) -> u64 {
    let Some(acked) = acked else {
        return from;
    };
    let bytes = fs::read(path).expect("record");
    let mut pos = from as usize;
    let mut end = from;
    while let Some(n) = bytes[pos..].iter().position(|&b| b == b'\n') {
        let line = &bytes[pos..pos + n];
        pos += n + 1;
        let Ok(l) = serde_json::from_slice::<RecordLine>(line) else {
            break;
        };
        let seq = match &l.record {
            Record::Message { message } => Some(seq_of(message)),
            Record::Compaction { messages, .. } => Some(seq_of(&messages[0])),
            _ => None,
        };
        if seq == Some(acked) {
            end = pos as u64;
            break;
        }
    }
    end
}

#[test]
fn crash_soak_sigkill_keeps_every_acked_append() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
        return;
    }
    let seed: u64 = std::env::var("OPENMAX_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0006);
    let kills: u64 = std::env::var("OPENMAX_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    // SIGKILL leaves the page cache intact, so what it tests (torn writes, acks after the
    // write) does not need a real disk; tmpfs keeps 200 kills fast. OPENMAX_CRASH_DIR overrides.
    let base = std::env::var_os("OPENMAX_CRASH_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("openmax-crash-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("proj")).expect("mkdir");
    let state = state_at(&dir);
    let exe = std::env::current_exe().expect("test exe");
    let mut rng = Rng::new(seed);
    let started = Instant::now();

    let mut model = Model::new(0);
    let mut session = String::new();
    let (mut acked_total, mut torn, mut sessions, mut records, mut compactions) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut killed_before_first_ack = 0u64;
    let mut power_cuts = 0u64;
    for k in 0..kills {
        let new_session = k % KILLS_PER_SESSION == 0;
        if new_session {
            records += model.records;
            compactions += model.compactions;
            session = format!("s{}", k / KILLS_PER_SESSION);
            sessions += 1;
            model = Model::new(model.next_seq);
        }
        let mut child = Command::new(&exe)
            .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .env("OPENMAX_TEST_CRASH_SEQ", model.next_seq.to_string())
            .env("OPENMAX_TEST_CRASH_SEED", rng.next_u64().to_string())
            .env(
                "OPENMAX_TEST_CRASH_NEW",
                if new_session { session.as_str() } else { "" },
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        // Kill after a random number of acks (0: while it starts, creates or resumes).
        let target = if new_session {
            1 + rng.below(10)
        } else {
            rng.below(11)
        };
        let mut max_acked: Option<u64> = None;
        let mut line = String::new();
        let mut seen = 0;
        while seen < target {
            line.clear();
            if out.read_line(&mut line).expect("child stdout") == 0 {
                let mut err = String::new();
                let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                panic!("child {k} exited early: {err}");
            }
            if let Some(n) = line.trim().strip_prefix("acked ") {
                max_acked = Some(n.parse().expect("ack number"));
                seen += 1;
            }
        }
        // Then let it run a random while longer (up to 3 ms), so kills land anywhere in its
        // loop: building a batch, inside the write, inside the sync.
        let spin = std::time::Duration::from_micros(rng.below(3000));
        let t0 = Instant::now();
        while t0.elapsed() < spin {
            std::hint::spin_loop();
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        // Acks printed before death that we had not read yet count too.
        let mut rest = String::new();
        out.read_to_string(&mut rest).expect("drain");
        for l in rest.lines() {
            if let Some(n) = l.trim().strip_prefix("acked ") {
                max_acked = Some(n.parse().expect("ack number"));
                seen += 1;
            }
        }
        acked_total += seen;
        if seen == 0 {
            killed_before_first_ack += 1;
        }

        // Half the time, also model a power loss: bytes after the last fdatasync may be lost
        // in part, so cut the file at a random point after the last acknowledged append (and
        // after what an earlier resume already accepted). This tears lines the way a machine
        // crash does, which a SIGKILL alone rarely does.
        let path = state.sessions_dir().join(format!("{session}.jsonl"));
        if rng.below(2) == 0 {
            let len = fs::metadata(&path).expect("record").len();
            let floor = ack_end(&path, model.verified_len, max_acked);
            if len > floor {
                let cut = floor + rng.below(len - floor + 1);
                if cut < len {
                    fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .expect("record")
                        .set_len(cut)
                        .expect("cut");
                    power_cuts += 1;
                }
            }
        }

        // Resume: readable, and identical to the independent replay.
        let r = resume_latest(&state).unwrap_or_else(|e| panic!("kill {k}: resume failed: {e}"));
        assert_eq!(r.session_id, session);
        torn += r.notices.iter().filter(|n| n.contains("torn")).count() as u64;
        model.catch_up(&path);
        if let Some(n) = max_acked {
            assert!(
                model.next_seq > n,
                "kill {k}: acked seq {n} missing (record ends before seq {})",
                model.next_seq
            );
        }
        assert_eq!(r.history, model.history, "kill {k}: history");
        assert_eq!(r.system, model.system, "kill {k}: system");
        assert_eq!(r.tools, model.tools, "kill {k}: tools");
        assert_eq!(r.mode, model.mode, "kill {k}: mode");
        drop(r);
    }
    records += model.records;
    compactions += model.compactions;
    println!(
        "crash soak: seed {seed:#x}, {kills} SIGKILLs ({killed_before_first_ack} before the first ack), \
         {sessions} sessions, {acked_total} acked appends all present, {records} records verified, \
         {compactions} compactions, {power_cuts} simulated power-loss cuts, {torn} torn tails ignored, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(kills < 200 || acked_total > kills, "the soak did real work");
    let _ = fs::remove_dir_all(&dir);
}
