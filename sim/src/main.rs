//! The `openmax-sim` binary: `run FILE...` and `explore --seed S --cases N`.

fn main() {}
