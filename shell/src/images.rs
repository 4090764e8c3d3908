//! Images for the model: a file or bytes checked and turned into the conversation's
//! [`Image`] (its type sniffed from the bytes, never from the name; its pixel size from the
//! header; its sha256; the bytes base64-encoded), under one size cap.
//!
//! Invariants: only the four types every provider takes (PNG, JPEG, GIF, WebP) are accepted;
//! anything else, an empty file or one over [`MAX_IMAGE_BYTES`] is an error naming the file
//! and what to do.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use openmax_core::conversation::Image;

use crate::digest::sha256_hex;

/// The largest image sent: Anthropic's per-image limit (5 MB), the strictest of the three APIs.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The image type `bytes` start with, if one every provider takes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match imagesize::image_type(bytes).ok()? {
        imagesize::ImageType::Png => Some("image/png"),
        imagesize::ImageType::Jpeg => Some("image/jpeg"),
        imagesize::ImageType::Gif => Some("image/gif"),
        imagesize::ImageType::Webp => Some("image/webp"),
        _ => None,
    }
}

/// Whether `path` names a regular file whose first bytes are an image of a type providers
/// take. Anything else (a FIFO, a device, a directory) is not opened at all: opening a FIFO
/// would wait for a writer.
pub fn is_image_file(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 64];
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    sniff(&head[..n]).is_some()
}

/// `bytes` as an image labelled `label` (a path, or where it came from).
pub fn from_bytes(label: &str, bytes: &[u8]) -> Result<Image, String> {
    if bytes.is_empty() {
        return Err(format!("{label}: the image is empty"));
    }
    let size = bytes.len() as u64;
    if size > MAX_IMAGE_BYTES {
        return Err(format!(
            "{label}: the image is {:.1} MB, over the {} MB an image may be (the providers' \
             limit); make it smaller (for example `convert {label} -resize 50% smaller.png`)",
            size as f64 / 1_048_576.0,
            MAX_IMAGE_BYTES / 1_048_576
        ));
    }
    let Some(media_type) = sniff(bytes) else {
        return Err(format!(
            "{label}: not a PNG, JPEG, GIF or WebP image (the types the models take)"
        ));
    };
    let dims = imagesize::blob_size(bytes).ok();
    Ok(Image {
        media_type: media_type.to_string(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        sha256: sha256_hex(bytes),
        path: label.to_string(),
        bytes: size,
        width: dims.and_then(|d| u32::try_from(d.width).ok()),
        height: dims.and_then(|d| u32::try_from(d.height).ok()),
    })
}

/// The image in the file at `path`, labelled `label`.
pub fn from_file(label: &str, path: &Path) -> Result<Image, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{label}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{label}: not a file"));
    }
    if meta.len() > MAX_IMAGE_BYTES {
        return from_bytes(label, &vec![0; (MAX_IMAGE_BYTES + 1) as usize]).map_err(|e| {
            e.replace(
                &format!("{:.1} MB", (MAX_IMAGE_BYTES + 1) as f64 / 1_048_576.0),
                &format!("{:.1} MB", meta.len() as f64 / 1_048_576.0),
            )
        });
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{label}: {e}"))?;
    from_bytes(label, &bytes)
}

/// The bytes of an image, decoded from its base64 (`None` when it holds none or is broken).
pub fn bytes_of(image: &Image) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(image.data.as_bytes())
        .ok()
}

/// Bytes from base64 text (an ACP image block's `data`).
pub fn decode(data: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim().as_bytes())
        .map_err(|e| format!("the image's base64 data is broken: {e}"))
}

/// A small valid PNG of `w`×`h` pixels (tests, the demo).
pub fn tiny_png(w: u32, h: u32) -> Vec<u8> {
    // Signature, then an IHDR chunk (CRC not checked by the sniffer or the size reader), then
    // an empty IEND.
    let mut v = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    v.extend_from_slice(&13u32.to_be_bytes());
    v.extend_from_slice(b"IHDR");
    v.extend_from_slice(&w.to_be_bytes());
    v.extend_from_slice(&h.to_be_bytes());
    v.extend_from_slice(&[8, 6, 0, 0, 0]);
    v.extend_from_slice(&[0, 0, 0, 0]);
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(b"IEND");
    v.extend_from_slice(&[0xae, 0x42, 0x60, 0x82]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_comes_from_the_bytes_the_size_from_the_header() {
        let png = tiny_png(64, 48);
        let img = from_bytes("shot.jpg", &png).unwrap();
        assert_eq!(img.media_type, "image/png", "the name does not decide");
        assert_eq!((img.width, img.height), (Some(64), Some(48)));
        assert_eq!(img.bytes, png.len() as u64);
        assert_eq!(bytes_of(&img).unwrap(), png);
        assert_eq!(img.sha256, sha256_hex(&png));
        let padded = |head: &[u8]| {
            let mut v = head.to_vec();
            v.resize(64, 0);
            v
        };
        assert_eq!(
            sniff(&padded(b"\xff\xd8\xff\xe0\0\x10JFIF")),
            Some("image/jpeg")
        );
        assert_eq!(sniff(&padded(b"GIF89a\x01\0\x01\0")), Some("image/gif"));
        assert_eq!(sniff(&padded(b"RIFF\0\0\0\0WEBPVP8 ")), Some("image/webp"));
    }

    #[test]
    fn not_images_empty_and_too_big_are_errors_naming_the_file() {
        assert!(from_bytes("a.txt", b"hello")
            .unwrap_err()
            .contains("a.txt: not a PNG"));
        assert!(from_bytes("e.png", b"").unwrap_err().contains("empty"));
        let mut big = tiny_png(1, 1);
        big.resize((MAX_IMAGE_BYTES + 1) as usize, 0);
        let e = from_bytes("big.png", &big).unwrap_err();
        assert!(
            e.contains("big.png: the image is 5.0 MB, over the 5 MB"),
            "{e}"
        );
        let dir = crate::scratch::path("img");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("huge.png");
        std::fs::write(&f, vec![0u8; 7 * 1024 * 1024]).unwrap();
        let e = from_file("huge.png", &f).unwrap_err();
        assert!(e.contains("the image is 7.0 MB"), "{e}");
        assert!(from_file("none.png", &dir.join("none.png")).is_err());
        // A FIFO is never opened (that would wait for a writer), nor is a directory.
        let fifo = dir.join("pipe.png");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(!is_image_file(&fifo));
        assert!(!is_image_file(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
