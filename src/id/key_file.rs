//! The server's mask key file, read: plain `std::fs`, nothing of PostgreSQL's. The setting
//! that names the file, and when it is read, are `src/pg/mask_key_file.rs`'s.

use crate::id::mask::{Key, KeyError};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The largest key file read: 32 digits, a line end and whitespace fit.
const MAX_FILE_BYTES: usize = 128;

/// What is wrong with a key file.
#[derive(Debug)]
pub enum KeyFileError {
    Unreadable(std::io::Error),
    NotAFile,
    /// Its permission bits let the group or others read or write it.
    OpenToOthers {
        mode: u32,
    },
    TooLong,
    Key(KeyError),
}

/// The key in the file at `path`: 32 hexadecimal digits, surrounding whitespace ignored.
/// Reads at most [`MAX_FILE_BYTES`], into the stack.
pub fn read_key_file(path: &Path) -> Result<Key, KeyFileError> {
    let meta = std::fs::metadata(path).map_err(KeyFileError::Unreadable)?;
    if !meta.is_file() {
        return Err(KeyFileError::NotAFile);
    }
    if meta.mode() & 0o077 != 0 {
        return Err(KeyFileError::OpenToOthers {
            mode: meta.mode() & 0o7777,
        });
    }
    let mut file = std::fs::File::open(path).map_err(KeyFileError::Unreadable)?;
    let mut buf = [0u8; MAX_FILE_BYTES];
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(KeyFileError::TooLong);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(KeyFileError::Unreadable(e)),
        }
    }
    Key::parse(buf[..len].trim_ascii()).map_err(KeyFileError::Key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(name: &str, content: &[u8], mode: u32) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("snowflake_id_key_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn reads_32_hex_digits_and_a_line_end() {
        let key = Key::parse(b"000102030405060708090a0b0c0d0e0f").unwrap();
        for content in [
            &b"000102030405060708090a0b0c0d0e0f"[..],
            b"000102030405060708090A0B0C0D0E0F\n",
            b" 000102030405060708090a0b0c0d0e0f\r\n",
        ] {
            assert_eq!(read_key_file(&file("ok", content, 0o600)).unwrap(), key);
        }
    }

    #[test]
    fn refuses_what_is_not_a_private_key_file() {
        let key = b"000102030405060708090a0b0c0d0e0f\n";
        assert!(matches!(
            read_key_file(&file("g", key, 0o640)),
            Err(KeyFileError::OpenToOthers { mode: 0o640 })
        ));
        assert!(matches!(
            read_key_file(&file("o", key, 0o604)),
            Err(KeyFileError::OpenToOthers { mode: 0o604 })
        ));
        let missing = std::env::temp_dir().join("snowflake_id_no_such_key_file");
        assert!(matches!(
            read_key_file(&missing),
            Err(KeyFileError::Unreadable(_))
        ));
        assert!(matches!(
            read_key_file(&std::env::temp_dir()),
            Err(KeyFileError::NotAFile)
        ));
        assert!(matches!(
            read_key_file(&file("long", &[b'0'; 4096], 0o600)),
            Err(KeyFileError::TooLong)
        ));
        assert!(matches!(
            read_key_file(&file("short", b"0001", 0o600)),
            Err(KeyFileError::Key(KeyError::Length { chars: 4 }))
        ));
        assert!(matches!(
            read_key_file(&file("two", b"0001\n0002\n", 0o600)),
            Err(KeyFileError::Key(KeyError::NotHex { position: 5 }))
        ));
    }
}
