//! Redisson's way of running its scripts: `EVALSHA` of the script's SHA-1, and on
//! `NOSCRIPT` (a restarted server, a promoted replica: scripts are not replicated) the
//! script itself with `EVAL`, which the server then keeps.

use crate::resp::{Conn, ConnError, Frame};

/// The SHA-1 of `data` in lower-case hex, as `SCRIPT LOAD` replies it.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in message.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, word) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*word);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// Runs `script` as Redisson does: `EVALSHA`, then `EVAL` if the server does not have it
/// (`NOSCRIPT`, which ran nothing). Whether `EVAL` was needed comes back too.
pub fn evalsha(
    c: &mut Conn,
    script: &str,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> Result<(Frame, bool), ConnError> {
    let sha = sha1_hex(script.as_bytes());
    match call(c, b"EVALSHA", sha.as_bytes(), keys, args)? {
        Frame::Error(e) if e.starts_with("NOSCRIPT") => Ok((eval(c, script, keys, args)?, true)),
        reply => Ok((reply, false)),
    }
}

/// Runs `script` with `EVAL`, as Redisson's read-write and plain locks send theirs.
pub fn eval(
    c: &mut Conn,
    script: &str,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> Result<Frame, ConnError> {
    call(c, b"EVAL", script.as_bytes(), keys, args)
}

/// `EVAL`-shaped `command body numkeys keys... args...`.
fn call(
    c: &mut Conn,
    command: &[u8],
    body: &[u8],
    keys: &[&[u8]],
    args: &[&[u8]],
) -> Result<Frame, ConnError> {
    let numkeys = keys.len().to_string();
    let mut all: Vec<&[u8]> = vec![command, body, numkeys.as_bytes()];
    all.extend_from_slice(keys);
    all.extend_from_slice(args);
    c.call(&all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_the_standard_vectors() {
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        // What Redis replies to `SCRIPT LOAD "return 1"`.
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
