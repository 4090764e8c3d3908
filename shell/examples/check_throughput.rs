//! Throughput of `openmax --check --stdio` on a stream of valid token lines.
//!
//! Generates a hello, then token lines until about `BYTES` (default 1 GB; first argument
//! overrides, in MB), then a message_done and a done, all on the fly through a `Read` adapter so
//! nothing is held in memory; the report goes to a sink. Prints MB/s and the peak RSS (VmHWM).
//!
//! Run: `cargo run --release -p openmax-shell --example check_throughput [MB] [token|thinking]`

use std::io::Read;
use std::time::Instant;

/// A reader that yields the stream without storing it.
struct TokenStream {
    header: Vec<u8>,
    line: Vec<u8>,
    footer: Vec<u8>,
    remaining_tokens: u64,
    /// Bytes of the current piece not yet handed out.
    pending: Vec<u8>,
    pos: usize,
    stage: u8,
    produced: u64,
}

impl TokenStream {
    fn new(target: u64, kind: &str) -> TokenStream {
        let header = b"{\"type\":\"hello\",\"proto\":\"openmax-stdio/6\",\"protocol_version\":6,\"session_id\":\"s-bench-0001\",\"version\":\"0.2.0\",\"project\":\"/tmp/bench\",\"continued\":false}\n".to_vec();
        let line = format!(
            "{{\"session_id\":\"s-bench-0001\",\"type\":\"{kind}\",\"text\":\"The quick brown fox jumps over the lazy dog, \\\"quoted\\\" and \\\\ escaped.\\n\"}}\n"
        )
        .into_bytes();
        let footer = b"{\"session_id\":\"s-bench-0001\",\"type\":\"message_done\",\"text\":\"...\"}\n{\"session_id\":\"s-bench-0001\",\"type\":\"done\",\"stop_reason\":\"stop\"}\n".to_vec();
        let remaining_tokens = target / line.len() as u64;
        TokenStream {
            pending: Vec::new(),
            pos: 0,
            stage: 0,
            produced: 0,
            header,
            line,
            footer,
            remaining_tokens,
        }
    }
}

impl Read for TokenStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            if self.pos == self.pending.len() {
                self.pos = 0;
                self.pending.clear();
                match self.stage {
                    0 => {
                        self.pending.extend_from_slice(&self.header);
                        self.stage = 1;
                    }
                    1 if self.remaining_tokens > 0 => {
                        // Batch token lines so the copy loop stays cheap.
                        let k = self.remaining_tokens.min(1024);
                        for _ in 0..k {
                            self.pending.extend_from_slice(&self.line);
                        }
                        self.remaining_tokens -= k;
                    }
                    1 => {
                        self.pending.extend_from_slice(&self.footer);
                        self.stage = 2;
                    }
                    _ => break,
                }
            }
            let take = (self.pending.len() - self.pos).min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&self.pending[self.pos..self.pos + take]);
            self.pos += take;
            n += take;
        }
        self.produced += n as u64;
        Ok(n)
    }
}

fn vm_hwm() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// CPU seconds (user + system) this process has used, from /proc/self/stat (USER_HZ = 100).
fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn main() {
    let mb: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    // Second argument: the line type to repeat (`token`, the fast path, by default;
    // `message_done` or `thinking` measure the full parse).
    let kind = std::env::args().nth(2).unwrap_or_else(|| "token".into());
    let mut input = TokenStream::new(mb * 1_000_000, &kind);
    let cpu_start = cpu_secs();
    let start = Instant::now();
    let code = openmax_shell::oneshot::check::run(&mut input, std::io::sink());
    let secs = start.elapsed().as_secs_f64();
    let bytes = input.produced;
    let cpu = match (cpu_start, cpu_secs()) {
        (Some(a), Some(b)) if b > a => format!(
            "; {:.2} CPU s = {:.0} MB per CPU second",
            b - a,
            bytes as f64 / 1e6 / (b - a)
        ),
        _ => String::new(),
    };
    println!(
        "check_throughput: {kind} lines, {} bytes in {:.2} s = {:.0} MB/s{cpu}; exit code {code}; peak RSS (VmHWM) {}",
        bytes,
        secs,
        bytes as f64 / 1e6 / secs,
        vm_hwm()
    );
    if code != 0 {
        std::process::exit(1);
    }
}
