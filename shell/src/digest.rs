//! sha256 in lowercase hex: one home for the digest that names a source's bytes, an approval,
//! a checkpoint object, an image in the session record.

use sha2::{Digest, Sha256};

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_digest_of_nothing_is_the_known_one() {
        assert_eq!(
            super::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(super::hex(&[0, 15, 255]), "000fff");
    }
}
