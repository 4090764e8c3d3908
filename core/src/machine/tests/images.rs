//! Images: a prompt's images follow its text in the request and count in the budget; the
//! prompt hooks see them described, not their bytes; a tool's images follow its result; a
//! compaction cuts old images to a line saying what they were.

use super::*;
use crate::conversation::Image;

fn image(path: &str, w: u32, h: u32) -> Image {
    Image {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
        sha256: "ab".repeat(32),
        path: path.into(),
        bytes: 1234,
        width: Some(w),
        height: Some(h),
    }
}

fn prompt(h: &mut H, text: &str, images: Vec<Image>) {
    h.input(Input::Prompt {
        text: text.into(),
        images,
    });
}

#[test]
fn a_prompts_images_follow_its_text_and_count_in_the_budget() {
    let mut plain = H::new();
    plain.user("what is this?");
    let without = compaction::estimate_body(&plain.last_body());
    plain.reply("nothing");

    let mut h = H::new();
    prompt(
        &mut h,
        "what is this?",
        vec![image("shot.png", 300, 250), image("b.png", 4000, 3000)],
    );
    let body = h.last_body();
    let user = &body.messages[0];
    assert_eq!(user.content.len(), 3);
    assert_eq!(user.content[0], Block::text("what is this?"));
    assert!(matches!(&user.content[1], Block::Image(i) if i.path == "shot.png"));
    assert!(matches!(&user.content[2], Block::Image(i) if i.path == "b.png"));
    let with = compaction::estimate_body(&body);
    // 300×250/750 = 100 tokens, the big one the 1600 ceiling, plus two blocks' framing.
    assert_eq!(with - without, 100 + 1600 + 2 * compaction::BLOCK_OVERHEAD);
    h.reply("a screenshot");
    assert!(h.take().contains(&"done stop".to_string()));
}

#[test]
fn an_image_whose_size_is_unknown_counts_as_the_most() {
    let mut i = image("x.png", 1, 1);
    i.width = None;
    assert_eq!(compaction::estimate_image(&i), compaction::MAX_IMAGE_TOKENS);
    assert_eq!(compaction::estimate_image(&image("y.png", 1, 1)), 1);
}

#[test]
fn prompt_hooks_see_the_images_described_and_a_refusal_blocks_them_too() {
    let mut c = config();
    c.freeze.hooks = vec![hook("gate", "user_prompt_submit", true)];
    let mut h = H::with(c);
    prompt(&mut h, "look", vec![image("shot.png", 10, 10)]);
    let payload = h
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::RunHook { payload, .. } => Some(payload.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(payload["prompt"], "look");
    assert_eq!(payload["images"][0]["path"], "shot.png");
    assert_eq!(payload["images"][0]["bytes"], 1234);
    assert!(
        payload["images"][0].get("data").is_none(),
        "no bytes in a hook payload"
    );
    h.input(Input::HookDone {
        hook_run: last_hook_run(&h),
        outcome: HookOutcome::Refuse {
            reason: "no screenshots".into(),
        },
    });
    assert_eq!(h.take(), s(&["done blocked"]));
    assert_eq!(h.sends(), 0);
}

#[test]
fn a_tools_images_follow_its_result() {
    let mut c = config();
    c.mode = Mode::Auto;
    let mut h = H::with(c);
    to_planning(&mut h);
    h.planned("c1", plan(false));
    h.input(Input::ToolDone {
        call_id: "c1".into(),
        outcome: ToolOutcome {
            ok: true,
            output: "image logo.png attached".into(),
            diffs: vec![],
            images: vec![image("logo.png", 64, 64)],
        },
    });
    let body = h.last_body();
    let results = &body.messages[2].content;
    assert!(matches!(&results[0], Block::ToolResult { id, .. } if id == "c1"));
    assert!(matches!(&results[1], Block::Image(i) if i.path == "logo.png"));
    h.reply("a logo");
}

#[test]
fn a_compaction_cuts_old_images_to_a_line() {
    let mut msgs = vec![
        Message {
            role: crate::conversation::Role::User,
            content: vec![
                Block::text("old"),
                Block::Image(image("old.png", 2000, 2000)),
            ],
        },
        Message::assistant_text("seen"),
        Message::user_text("new"),
    ];
    // A target just under the estimate: cutting the image is enough.
    let all = compaction::estimate_messages(&msgs);
    let receipt = compaction::compact(&mut msgs, 2, 0, None, all - 1);
    assert_eq!(receipt.compacted_messages, 1);
    assert_eq!(msgs.len(), 3, "the image went, the turn stayed");
    assert_eq!(
        msgs[0].plain_text(),
        "old[compacted: an image old.png, image/png, 1234 bytes, 2000×2000 was cut to fit the context window]"
    );
    assert!(!serde_json::to_string(&msgs)
        .unwrap()
        .contains("iVBORw0KGgo="));
}
