//! A generated 100,000-file tree for the `grep`/`glob` scale test and the benchmark.
//!
//! Layout: `.gitignore` (`ignored/`, `*.log`); `d000`…`d099`, each with `f0000.txt`…`f0999.txt`
//! (100,000 files; `f0500.txt` of each holds `NEEDLE` on line 2, the rest do not) and one
//! `x.log` holding `NEEDLE`; `ignored/` with 1,000 files holding `NEEDLE`. Within a directory,
//! files of the same content are hard links of one another: creating files is slow on some
//! temp file systems, linking is not.

use std::path::Path;

/// Directories of 1,000 files each.
pub const DIRS: usize = 100;
/// Files per directory.
pub const FILES_PER_DIR: usize = 1000;
/// Text of the files that match.
pub const NEEDLE_TEXT: &str = "first line\nNEEDLE here\nlast line\n";
/// Text of the files that do not.
pub const PLAIN_TEXT: &str = "first line\nnothing to see\nlast line\n";

/// Generate the tree under `root` (which must exist and be empty).
pub fn generate(root: &Path) {
    std::fs::write(root.join(".gitignore"), "ignored/\n*.log\n").expect("write");
    std::fs::create_dir(root.join("ignored")).expect("mkdir");
    let ig_needle = root.join("ignored/n0000.txt");
    std::fs::write(&ig_needle, NEEDLE_TEXT).expect("write");
    for i in 1..1000 {
        std::fs::hard_link(&ig_needle, root.join(format!("ignored/n{i:04}.txt"))).expect("link");
    }
    std::thread::scope(|s| {
        for part in 0..2 {
            s.spawn(move || {
                for d in (part..DIRS).step_by(2) {
                    let dir = root.join(format!("d{d:03}"));
                    std::fs::create_dir(&dir).expect("mkdir");
                    // One source per directory: a file has at most 65,000 links on ext4.
                    let plain = dir.join("f0000.txt");
                    let needle = dir.join("f0500.txt");
                    std::fs::write(&plain, PLAIN_TEXT).expect("write");
                    std::fs::write(&needle, NEEDLE_TEXT).expect("write");
                    for f in (1..FILES_PER_DIR).filter(|&f| f != 500) {
                        std::fs::hard_link(&plain, dir.join(format!("f{f:04}.txt"))).expect("link");
                    }
                    std::fs::hard_link(&needle, dir.join("x.log")).expect("link");
                }
            });
        }
    });
}
