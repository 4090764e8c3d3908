//! Images end to end: `-p --image` arrives at the mock as an image block in each provider's
//! request format (Anthropic `image` with a base64 source, Responses `input_image`, Chat
//! Completions `image_url`, each a data URL of the file's bytes and its sniffed type);
//! a file that is not an image, or one over the cap, is refused before any request; `read_file`
//! of an image sends it after the call's result; the session record keeps its sha256 and path
//! but not its bytes, and `--continue` sends it again; an ACP `image` block (advertised) and a
//! TUI `@path` (typed, or a pasted path) arrive the same way, in each provider's format.

use base64::Engine;
use openmax_tests::acp;
use openmax_tests::tmux::Pane;
use openmax_tests::*;
use serde_json::{json, Value};

/// A small PNG of `w`×`h` (a valid header; enough for every provider's type sniffing here).
fn png(w: u32, h: u32) -> Vec<u8> {
    openmax_shell::images::tiny_png(w, h)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The image parts of a logged request body, as (media type, base64 data), in each API's form.
fn images_in(flavor: Flavor, body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let data_url = |u: &str| {
        let rest = u.strip_prefix("data:").expect("a data URL");
        let (mt, data) = rest.split_once(";base64,").expect("base64");
        (mt.to_string(), data.to_string())
    };
    match flavor {
        Flavor::Anthropic => {
            for m in body["messages"].as_array().unwrap() {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "image" {
                        assert_eq!(b["source"]["type"], "base64");
                        out.push((
                            b["source"]["media_type"].as_str().unwrap().into(),
                            b["source"]["data"].as_str().unwrap().into(),
                        ));
                    }
                }
            }
        }
        Flavor::Openai => {
            for item in body["input"].as_array().unwrap() {
                for p in item["content"].as_array().into_iter().flatten() {
                    if p["type"] == "input_image" {
                        out.push(data_url(p["image_url"].as_str().unwrap()));
                    }
                }
            }
        }
        Flavor::OpenaiChat => {
            for m in body["messages"].as_array().unwrap() {
                for p in m["content"].as_array().into_iter().flatten() {
                    if p["type"] == "image_url" {
                        out.push(data_url(p["image_url"]["url"].as_str().unwrap()));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn p_image_arrives_as_each_providers_image_block() {
    let shot = png(64, 48);
    let logo = png(16, 16);
    for flavor in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
        let env = TestEnv::new();
        let mock = MockServer::start(vec![text_reply("a screenshot")]);
        env.mock_config(flavor, &mock.base_url(), "");
        env.trust();
        // The name says JPEG; the bytes say PNG, and the bytes decide.
        std::fs::write(env.root.join("shot.jpg"), &shot).unwrap();
        std::fs::write(env.project.join("logo.png"), &logo).unwrap();
        let shot_path = env.root.join("shot.jpg").display().to_string();
        let out = env.run(&[
            "-p",
            "what is on these?",
            "--image",
            &shot_path,
            "--image",
            "logo.png",
        ]);
        assert_eq!(out.code, Some(0), "{flavor:?}: {}", out.stderr);
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1, "{flavor:?}");
        let got = images_in(flavor, &reqs[0].body);
        assert_eq!(
            got,
            [
                ("image/png".to_string(), b64(&shot)),
                ("image/png".to_string(), b64(&logo))
            ],
            "{flavor:?}: {}",
            reqs[0].body
        );
        assert!(reqs[0].body.to_string().contains("what is on these?"));
    }
}

#[test]
fn a_file_that_is_not_an_image_or_too_big_is_refused_before_any_request() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("never")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    std::fs::write(env.project.join("notes.txt"), "hello").unwrap();
    let out = env.run(&["-p", "look", "--image", "notes.txt"]);
    // A file named on the command line that cannot be used is a usage error, as a bad
    // --output-schema file is.
    assert_eq!(out.code, Some(64));
    assert!(
        out.stderr
            .contains("notes.txt: not a PNG, JPEG, GIF or WebP image"),
        "{}",
        out.stderr
    );
    let mut big = png(4000, 4000);
    big.resize(6 * 1024 * 1024, 0);
    std::fs::write(env.project.join("big.png"), &big).unwrap();
    let out = env.run(&["-p", "look", "--image", "big.png"]);
    assert_eq!(out.code, Some(64));
    assert!(
        out.stderr
            .contains("big.png: the image is 6.0 MB, over the 5 MB"),
        "{}",
        out.stderr
    );
    let out = env.run(&["-p", "look", "--image", "missing.png"]);
    assert_eq!(out.code, Some(64));
    assert!(out.stderr.contains("missing.png"), "{}", out.stderr);
    assert!(mock.requests().is_empty());
}

#[test]
fn read_file_of_an_image_sends_it_and_the_record_keeps_its_hash_not_its_bytes() {
    let env = TestEnv::new();
    let logo = png(32, 32);
    std::fs::write(env.project.join("logo.png"), &logo).unwrap();
    let mock = MockServer::start(vec![
        tool_reply("c1", "read_file", json!({"path": "logo.png"})),
        text_reply("a logo"),
        text_reply("still a logo"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("what is logo.png?");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], true);
    assert_eq!(
        end["output"],
        format!(
            "[image logo.png, image/png, {} bytes, 32×32 follows]",
            logo.len()
        )
    );
    let sid = s.hello["session_id"].as_str().unwrap().to_string();
    s.finish();
    let reqs = mock.requests();
    let second = &reqs[1].body;
    assert_eq!(
        images_in(Flavor::Anthropic, second),
        [("image/png".to_string(), b64(&logo))]
    );
    // The image follows the tool result in the same user message.
    let last_user = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last_user["content"][0]["type"], "tool_result");
    assert_eq!(last_user["content"][1]["type"], "image");

    let record = std::fs::read_to_string(env.record_path(&sid)).unwrap();
    let sha = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(&logo);
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert!(record.contains(&sha), "the record names the image's sha256");
    assert!(record.contains("\"path\":\"logo.png\""));
    assert!(
        !record.contains(&b64(&logo)),
        "the record holds no image bytes"
    );
    let stored = env.record_path(&sid).with_extension("images").join(&sha);
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        logo,
        "stored once, beside the record"
    );

    // Resumed, the image goes to the model again, from the stored copy.
    std::fs::remove_file(env.project.join("logo.png")).unwrap();
    let mut s = env.stdio(&["--continue"]);
    s.user("and now?");
    s.turn();
    s.finish();
    let reqs = mock.requests();
    assert_eq!(
        images_in(Flavor::Anthropic, &reqs[2].body),
        [("image/png".to_string(), b64(&logo))]
    );
}

#[test]
fn an_acp_image_block_arrives_as_each_providers_image_and_image_is_advertised() {
    let shot = png(20, 10);
    for flavor in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
        let env = TestEnv::new();
        let mock = MockServer::start(vec![text_reply("a cat")]);
        env.mock_config(flavor, &mock.base_url(), "");
        env.trust();
        let lines = acp::client(
            &env,
            json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "what is this?",
                "blocks": [{"type": "image", "mimeType": "image/png", "data": b64(&shot)}]}]}),
        );
        assert_eq!(
            lines[0]["initialize"]["agentCapabilities"]["promptCapabilities"]["image"],
            true
        );
        assert_eq!(
            acp::answers(&lines),
            vec![&json!({"response": {"stopReason": "end_turn"}})],
            "{flavor:?}"
        );
        let reqs = mock.requests();
        assert_eq!(
            images_in(flavor, &reqs[0].body),
            [("image/png".to_string(), b64(&shot))],
            "{flavor:?}"
        );
    }
    // A block that is no image is refused, naming why.
    let (env, _mock) = acp::setup(vec![text_reply("never")]);
    let lines = acp::client(
        &env,
        json!({"steps": [{"op": "new"}, {"op": "prompt", "text": "x",
            "blocks": [{"type": "image", "mimeType": "image/png", "data": b64(b"hello")}]}]}),
    );
    let err = lines.iter().find_map(|l| l.get("error")).expect("an error");
    assert!(err.to_string().contains("not a PNG"), "{err}");
}

#[test]
fn the_tui_attaches_an_at_path_image_and_a_pasted_image_path() {
    for flavor in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
        let env = TestEnv::new();
        let mock = MockServer::start(vec![text_reply("one image"), text_reply("another")]);
        env.mock_config(flavor, &mock.base_url(), "");
        env.trust();
        let shot = png(40, 30);
        std::fs::write(env.project.join("shot.png"), &shot).unwrap();
        let dropped = png(8, 8);
        std::fs::write(env.root.join("dropped.png"), &dropped).unwrap();
        let pane = Pane::start(&env, &[], 100, 30);
        pane.wait_text("test-model");
        pane.type_text("what is in @shot.png?");
        pane.keys(&["Enter"]);
        pane.wait_text("one image");
        // A terminal pastes a dropped file as its path.
        pane.type_text("and ");
        pane.paste(&format!("'{}'", env.root.join("dropped.png").display()));
        pane.wait_text("dropped.png");
        pane.keys(&["Enter"]);
        pane.wait_text("another");
        pane.keys(&["C-d"]);
        pane.wait_exit();
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 2, "{flavor:?}: {}", pane.history());
        assert_eq!(
            images_in(flavor, &reqs[0].body),
            [("image/png".to_string(), b64(&shot))],
            "{flavor:?}"
        );
        assert!(reqs[0].body.to_string().contains("what is in @shot.png?"));
        let second = images_in(flavor, &reqs[1].body);
        assert_eq!(
            second.last(),
            Some(&("image/png".to_string(), b64(&dropped))),
            "{flavor:?}: {}",
            reqs[1].body
        );
    }
}
