//! Coverage runs only (bench/coverage-policy.sh copies this file into its scratch tree): the
//! sandbox's first process cannot write its counters where the profile runtime would, so it
//! writes them into a memfd the helper made before the clone, and the helper keeps the larger
//! of each counter before it writes its own at exit.
use std::sync::atomic::{AtomicI32, Ordering};

extern "C" {
    fn __llvm_profile_begin_counters() -> *mut u64;
    fn __llvm_profile_end_counters() -> *mut u64;
    fn __llvm_profile_set_filename(name: *const libc::c_char);
}

static FD: AtomicI32 = AtomicI32::new(-1);

fn counters() -> &'static mut [u64] {
    // SAFETY: the profile runtime's counter section, alive for the whole process.
    unsafe {
        let (b, e) = (
            __llvm_profile_begin_counters(),
            __llvm_profile_end_counters(),
        );
        std::slice::from_raw_parts_mut(b, e.offset_from(b) as usize)
    }
}

/// In the helper before the clone.
pub fn open() {
    // SAFETY: memfd_create with a C string and flags.
    let fd = unsafe { libc::memfd_create(c"openmax-coverage".as_ptr(), libc::MFD_CLOEXEC) };
    FD.store(fd, Ordering::Relaxed);
}

/// In the sandbox's first process before it exits: its counters into the memfd, and the
/// runtime's own write at exit into /dev/null (the profile directory cannot be written there,
/// and a failed write, or one marked done, says so on the command's stderr).
pub fn emit() {
    // SAFETY: a C string the runtime copies.
    unsafe { __llvm_profile_set_filename(c"/dev/null".as_ptr()) };
    let fd = FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let c = counters();
    let (p, len) = (c.as_ptr().cast::<u8>(), c.len() * 8);
    let mut at = 0;
    while at < len {
        // SAFETY: within the counter section.
        let n = unsafe { libc::pwrite(fd, p.add(at).cast(), len - at, at as libc::off_t) };
        if n <= 0 {
            return;
        }
        at += n as usize;
    }
}

/// In the helper once the first process has ended: the larger of each counter.
pub fn absorb() {
    let fd = FD.swap(-1, Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let c = counters();
    let mut theirs = vec![0u64; c.len()];
    let (p, len) = (theirs.as_mut_ptr().cast::<u8>(), c.len() * 8);
    let mut at = 0;
    while at < len {
        // SAFETY: within `theirs`.
        let n = unsafe { libc::pread(fd, p.add(at).cast(), len - at, at as libc::off_t) };
        if n <= 0 {
            break;
        }
        at += n as usize;
    }
    for (own, t) in c.iter_mut().zip(&theirs) {
        *own = (*own).max(*t);
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
}
