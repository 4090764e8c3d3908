//! `openmax-test-deps`: install every third-party component the end-to-end tests run against
//! (see `openmax_tests::deps`) into the cache under `target/`, so `.ci/run` pays for the
//! downloads once, up front, with a clear message if a registry cannot be reached.

fn main() {
    openmax_tests::deps::install_all();
}
