//! The `openmax` binary entry point.

fn main() {
    println!("openmax 0.2.0");
}
