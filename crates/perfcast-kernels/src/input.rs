//! Reading an input file whole, the one way every reader of perfcast does it (configurations
//! through `perfcast-config`, cases files, studies and sweeps, traces, Hugging Face configs,
//! kernel tables, CSV tables): refused unless it is a regular file (a device such as
//! `/dev/zero` reads forever, a FIFO blocks until a writer comes; a symlink counts as what it
//! points to), and refused above a size bound of its kind, checked before reading and while
//! reading (a file growing under the read stops at the bound).

use std::io::{Error, ErrorKind, Read as _};
use std::path::Path;

/// Largest text input (configurations, cases files, studies, CSV tables): the largest
/// shipped one, `configs/validation/cases.toml`, is under 4 MB.
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Largest binary input (a kernel table's Parquet file; the largest shipped one is under
/// 2 MB).
pub const MAX_BINARY_BYTES: u64 = 1 << 30;

/// The bytes of the regular file at `path`, at most `max_bytes` of them.
pub fn read_bytes(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (an input is read whole: a device or a FIFO would read forever or block)",
        ));
    }
    let too_big = || {
        Error::new(
            ErrorKind::InvalidData,
            format!("larger than an input of its kind may be ({max_bytes} bytes)"),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)?
        .take(max_bytes + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > max_bytes {
        return Err(too_big());
    }
    Ok(out)
}

/// The UTF-8 text of the regular file at `path`, at most `max_bytes` long.
pub fn read_text(path: &Path, max_bytes: u64) -> std::io::Result<String> {
    String::from_utf8(read_bytes(path, max_bytes)?)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("not UTF-8 text: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_only_and_bounded() {
        let dir = std::env::temp_dir().join(format!("perfcast-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.toml");
        std::fs::write(&f, "x = 1\n").unwrap();
        assert_eq!(read_text(&f, 100).unwrap(), "x = 1\n");
        let e = read_text(&f, 3).unwrap_err().to_string();
        assert!(
            e.contains("larger than an input of its kind may be (3 bytes)"),
            "{e}"
        );
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_text(&f, 100)
            .unwrap_err()
            .to_string()
            .contains("not UTF-8"));
        // A directory, and (on Unix) a device and a FIFO: refused before any read.
        let e = read_bytes(&dir, 100).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        #[cfg(unix)]
        {
            let e = read_bytes(Path::new("/dev/zero"), 100)
                .unwrap_err()
                .to_string();
            assert!(e.contains("not a regular file"), "{e}");
            let fifo = dir.join("fifo");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            if made.is_ok_and(|s| s.success()) {
                let e = read_bytes(&fifo, 100).unwrap_err().to_string();
                assert!(e.contains("not a regular file"), "{e}");
            }
        }
        assert!(read_bytes(&dir.join("missing"), 100).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
