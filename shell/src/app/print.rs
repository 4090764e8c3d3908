//! `openmax -p PROMPT`: one prompt for a script, CI or a person at a shell (docs/print.md).
//!
//! Before anything starts: the prompt (`-` reads all of stdin, which must be UTF-8 and not
//! empty) and the `--output-schema` file (read and compiled) are checked, a problem being a
//! usage error ([`exit::USAGE`]). Then the session opens as every frontend's does, in the mode
//! `--mode` asked for (this run only; an agent-spawned run may only tighten it, else
//! [`exit::NOPERM`]), the prompt goes in (with the schema's instruction), and the run's sink
//! ([`PrintRun`]) reports in the chosen format and computes the exit code.
//!
//! Invariant: a `-p` run never saves a mode: it sends no `approval_mode`, and `--mode` only
//! sets the core's mode for this process.

use std::io::Read;

use openmax_core::machine::Input;
use openmax_core::wire::Command;

use super::cli::{Cli, Pick, PrintOptions};
use crate::exit;
use crate::frontend::output_schema::OutputSchema;
use crate::frontend::print_run::OutputFormat;
use crate::frontend::print_run::PrintRun;
use crate::run::{Runtime, SignalPolicy};
use crate::start::{handshake, open, Opened, Opener, PrintOpen};

/// The largest prompt `-p -` reads from stdin: the contract's largest command line.
pub const MAX_STDIN_PROMPT: usize = openmax_core::wire::MAX_LINE_BYTES;

/// Run `-p`; the process exit code.
pub fn run(cli: &Cli, prompt: &str, pick: Pick, opts: &PrintOptions) -> i32 {
    let (text, images, schema) = match the_prompt(cli, prompt, opts) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let resume = pick.resume();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("openmax: could not start the runtime: {e}");
            return exit::FAILED;
        }
    };
    let opener = Opener::Print(PrintOpen {
        mode: opts.mode,
        driver_ends_input: schema.is_some(),
    });
    let Opened {
        core,
        mut backend,
        session_id,
        project,
        transcript,
        notices,
        prices,
        ..
    } = match rt.block_on(open(&cli.flags(), None, resume, opener, Vec::new())) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("openmax: {}", e.message);
            return e.code;
        }
    };
    let mut sink = PrintRun::new(
        opts.format,
        &session_id,
        std::io::stdout(),
        std::io::stderr(),
        schema,
    );
    if opts.format == OutputFormat::StreamJson {
        for line in handshake(&session_id, &project, transcript.as_ref()) {
            sink.raw_line(&line);
        }
    }
    if let Err(e) = backend.settle_session() {
        eprintln!("openmax: could not start a session: {e}");
        return exit::FAILED;
    }
    let board = backend.task_board();
    let mut runtime = Runtime::new(core, backend, sink);
    let tx = runtime.sender();
    runtime.sink_mut().set_sender(tx);
    runtime.forward_notices(notices);
    runtime.handle_signals(SignalPolicy::CancelTurn);
    // The core is non-interactive: it ends the session after this command's done (with a
    // schema, the sink ends the input once the answer is checked).
    runtime.push_input(if images.is_empty() {
        Input::Line(Command::User { text }.to_line())
    } else {
        Input::Prompt { text, images }
    });
    let (code, mut sink) = rt.block_on(runtime.run());
    sink.add_children(board.children());
    // Do not wait for leftover blocking work (a plan job) after the session is over.
    rt.shutdown_background();
    crate::sandbox::reaper::sweep();
    sink.finish(code, prices.as_ref())
}

/// The prompt's text (with the schema's instruction), its images and the `--output-schema`,
/// checked before anything starts; a problem is a usage error (its exit code).
fn the_prompt(
    cli: &Cli,
    prompt: &str,
    opts: &PrintOptions,
) -> Result<
    (
        String,
        Vec<openmax_core::conversation::Image>,
        Option<OutputSchema>,
    ),
    i32,
> {
    let prompt = if prompt == "-" {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() {
            eprintln!("openmax: reading the prompt from stdin; end it with Ctrl-D");
        }
        match read_prompt(std::io::stdin().lock()) {
            Ok(p) => p,
            Err(e) => return Err(usage(e)),
        }
    } else {
        prompt.to_string()
    };
    if prompt.trim().is_empty() {
        return Err(usage(
            "the prompt is empty: give -p a prompt, or -p - with one on stdin",
        ));
    }
    let schema = match &opts.schema {
        Some(path) => match OutputSchema::load(path) {
            Ok(s) => Some(s),
            Err(e) => return Err(usage(e)),
        },
        None => None,
    };
    let mut images = Vec::new();
    for path in &cli.images {
        match crate::images::from_file(&path.display().to_string(), path) {
            Ok(img) => images.push(img),
            Err(e) => return Err(usage(format!("--image {e}"))),
        }
    }
    let text = match &schema {
        Some(s) => s.instruct(&prompt),
        None => prompt,
    };
    Ok((text, images, schema))
}

fn usage(e: impl std::fmt::Display) -> i32 {
    eprintln!("openmax: {e}");
    exit::USAGE
}

/// All of `input` as the prompt: UTF-8, at most [`MAX_STDIN_PROMPT`] bytes, not blank.
pub fn read_prompt(input: impl Read) -> Result<String, String> {
    let mut bytes = Vec::new();
    input
        .take(MAX_STDIN_PROMPT as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("could not read the prompt from stdin: {e}"))?;
    if bytes.len() > MAX_STDIN_PROMPT {
        return Err(format!(
            "the prompt on stdin is longer than {} MiB",
            MAX_STDIN_PROMPT >> 20
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "the prompt on stdin is not valid UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    if text.trim().is_empty() {
        return Err("the prompt on stdin is empty (-p - reads the prompt from stdin)".into());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdin_prompt_is_utf8_and_not_empty() {
        assert_eq!(
            read_prompt("fix the bug\nin a.rs\n".as_bytes()),
            Ok("fix the bug\nin a.rs\n".into())
        );
        let e = read_prompt(&b"ok \xff no"[..]).unwrap_err();
        assert!(e.contains("not valid UTF-8 (at byte 3)"), "{e}");
        let e = read_prompt(&b" \n\t"[..]).unwrap_err();
        assert!(e.contains("empty"), "{e}");
        let big = vec![b'a'; MAX_STDIN_PROMPT + 1];
        assert!(read_prompt(&big[..]).unwrap_err().contains("longer"));
    }
}
