//! The module's version, from the crate's (the workspace's, shared with the client crate):
//! `x.y.z` in `INFO rlock` and `x*10000 + y*100 + z` in `MODULE LIST`, as other modules do.
//! CHANGELOG.md says what each version added.

use std::ffi::CStr;

/// `x.y.z`.
pub const TEXT: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(text) => text,
        Err(_) => panic!("the crate version has a NUL byte"),
    };

/// `x*10000 + y*100 + z`, what `MODULE LIST` shows as `ver`.
pub const NUMBER: i32 = number(env!("CARGO_PKG_VERSION"));

/// `x*10000 + y*100 + z` of `x.y.z` (a pre-release or build suffix after `z` is ignored);
/// refuses, at compile time, anything else or a part past 99 where it would run into the next.
const fn number(text: &str) -> i32 {
    let bytes = text.as_bytes();
    let mut parts = [0i32; 3];
    let (mut part, mut digits, mut i) = (0, 0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'.' {
            assert!(digits > 0 && part < 2, "the version is not x.y.z");
            part += 1;
            digits = 0;
        } else if b.is_ascii_digit() {
            parts[part] = parts[part] * 10 + (b - b'0') as i32;
            digits += 1;
        } else {
            break;
        }
        i += 1;
    }
    assert!(part == 2 && digits > 0, "the version is not x.y.z");
    assert!(
        parts[1] < 100 && parts[2] < 100,
        "a minor or patch version past 99"
    );
    parts[0] * 10000 + parts[1] * 100 + parts[2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_is_major_minor_patch_in_two_digits_each() {
        assert_eq!(number("2.1.0"), 20100);
        assert_eq!(number("1.0.0"), 10000);
        assert_eq!(number("12.34.56"), 123456);
        assert_eq!(number("3.0.1-rc.1"), 30001);
    }

    #[test]
    fn text_and_number_agree() {
        let text = TEXT.to_str().unwrap();
        let parts: Vec<i32> = text.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(NUMBER, parts[0] * 10000 + parts[1] * 100 + parts[2]);
    }
}
