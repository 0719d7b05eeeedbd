//! Where the servers keep their data: a temp dir in memory (`/dev/shm`) when the machine has a
//! large enough one, else in the system's temp dir. A test's cluster is written in full at its
//! start (the PostgreSQL template's copy) and thrown away at its end; in memory that write
//! does not queue behind the builds' on a shared disk. A process
//! crash loses nothing either way (what the fault tests simulate); only what a test keeps past
//! its end would need a disk, and none does.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Result;

/// The smallest `/dev/shm` used: a few clusters and Redis data at once, with room to spare
/// (containers often get 64 MiB, too little).
const MIN_SHM_BYTES: u64 = 1 << 30;

/// A new temp dir for a server's data, removed when dropped.
pub(crate) fn tempdir() -> Result<tempfile::TempDir> {
    let builder = {
        let mut b = tempfile::Builder::new();
        b.prefix("seckill-test-");
        b
    };
    Ok(match in_memory() {
        Some(dir) => builder.tempdir_in(dir)?,
        None => builder.tempdir()?,
    })
}

/// `/dev/shm` if it is a tmpfs of at least [`MIN_SHM_BYTES`] and `TMPDIR` does not ask for
/// another place.
fn in_memory() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if std::env::var_os("TMPDIR").is_some() {
            return None;
        }
        let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
        let options = mounts.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(1) == Some(&"/dev/shm") && fields.get(2) == Some(&"tmpfs"))
                .then(|| fields.get(3).copied().unwrap_or_default())
        })?;
        // No `size=`: the kernel's default, half the memory.
        let size = options
            .split(',')
            .find_map(|o| o.strip_prefix("size="))
            .map_or(Some(u64::MAX), tmpfs_size)?;
        (size >= MIN_SHM_BYTES).then(|| PathBuf::from("/dev/shm"))
    })
    .as_deref()
}

/// A tmpfs `size=` option in bytes (`/proc/mounts` shows it in KiB, `24683568k`); `None` for
/// what is not a size.
fn tmpfs_size(value: &str) -> Option<u64> {
    let (digits, unit) = value.split_at(
        value
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(value.len()),
    );
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return None,
    };
    Some(n << shift)
}

#[cfg(test)]
mod tests {
    use super::tmpfs_size;

    #[test]
    fn tmpfs_sizes_are_read_with_their_unit() {
        assert_eq!(tmpfs_size("24683568k"), Some(24_683_568 << 10));
        assert_eq!(tmpfs_size("64m"), Some(64 << 20));
        assert_eq!(tmpfs_size("2G"), Some(2 << 30));
        assert_eq!(tmpfs_size("4096"), Some(4096));
        // A share of memory: not worth reading, the disk will do.
        assert_eq!(tmpfs_size("50%"), None);
    }
}
