//! The audit log file, rotated by size as kube-apiserver rotates its own
//! (lumberjack): past `maxsize` MB the file is renamed
//! `<name>-<UTC time>.<ext>` and a new one opened; backups beyond
//! `maxbackup`, or older than `maxage` days, are removed; with `compress`,
//! backups are gzipped.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How the file rotates (`0` turns each bound off).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rotation {
    /// Bytes before the file is rotated (`maxsize` in MB; 0: never).
    pub max_bytes: u64,
    /// Backups kept (0: all).
    pub max_backups: usize,
    /// Days a backup is kept (0: forever).
    pub max_age_days: u64,
    /// Gzip backups.
    pub compress: bool,
}

/// An open audit log file.
pub struct Rotating {
    path: PathBuf,
    file: File,
    size: u64,
    rotation: Rotation,
}

/// Opens `path` for appending (its folder made 0700, the file 0600, as the
/// apiserver makes them).
fn open(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

use std::os::unix::fs::DirBuilderExt;

impl Rotating {
    /// Opens (or creates) the log at `path`.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Rotating> {
        let file = open(path)?;
        let size = file.metadata()?.len();
        Ok(Rotating {
            path: path.to_path_buf(),
            file,
            size,
            rotation,
        })
    }

    /// Appends `bytes` (whole events), rotating first if they would take
    /// the file past its size. A write larger than the size alone goes to a
    /// fresh file rather than being lost.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let max = self.rotation.max_bytes;
        if max > 0 && self.size > 0 && self.size + bytes.len() as u64 > max {
            self.rotate()?;
        }
        self.file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// Renames the file to its backup name, opens a new one, and prunes the
    /// backups.
    fn rotate(&mut self) -> io::Result<()> {
        let backup = backup_name(&self.path, SystemTime::now());
        std::fs::rename(&self.path, &backup)?;
        self.file = open(&self.path)?;
        self.size = 0;
        if self.rotation.compress
            && let Err(e) = compress(&backup)
        {
            tracing::warn!(file = %backup.display(), error = %e, "cannot compress a rotated audit log; kept as it is");
        }
        self.prune();
        Ok(())
    }

    /// Removes backups beyond `max_backups` (oldest first) and older than
    /// `max_age_days`.
    fn prune(&self) {
        let mut backups = backups(&self.path);
        backups.sort_by_key(|b| std::cmp::Reverse(b.1));
        let now = SystemTime::now();
        let max_age = Duration::from_secs(self.rotation.max_age_days * 86_400);
        for (i, (path, at)) in backups.iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && i >= self.rotation.max_backups;
            let too_old = self.rotation.max_age_days > 0
                && now.duration_since(*at).unwrap_or_default() > max_age;
            if (too_many || too_old)
                && let Err(e) = std::fs::remove_file(path)
            {
                tracing::warn!(file = %path.display(), error = %e, "cannot remove an old audit log");
            }
        }
    }
}

/// `audit.log` → (`audit`, `.log`).
fn stem_ext(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.').filter(|&i| i > 0) {
        Some(i) => (name[..i].to_string(), name[i..].to_string()),
        None => (name, String::new()),
    }
}

/// The backup's name: `<stem>-2006-01-02T15-04-05.000<ext>`, in UTC.
pub fn backup_name(path: &Path, at: SystemTime) -> PathBuf {
    let (stem, ext) = stem_ext(path);
    // 2006-01-02T15:04:05.000Z → 2006-01-02T15-04-05.000
    let t = humantime::format_rfc3339_millis(at).to_string();
    let t = t.trim_end_matches('Z').replace(':', "-");
    path.with_file_name(format!("{stem}-{t}{ext}"))
}

/// The backups of the log at `path`, with the time in their names.
pub fn backups(path: &Path) -> Vec<(PathBuf, SystemTime)> {
    let (stem, ext) = stem_ext(path);
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let prefix = format!("{stem}-");
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(&prefix)?;
            let rest = rest.strip_suffix(".gz").unwrap_or(rest);
            let t = rest.strip_suffix(ext.as_str())?;
            // 2006-01-02T15-04-05.000 → 2006-01-02T15:04:05.000Z
            let (date, time) = t.split_once('T')?;
            let when = humantime::parse_rfc3339(&format!("{date}T{}Z", time.replacen('-', ":", 2)))
                .ok()?;
            Some((e.path(), when))
        })
        .collect()
}

fn compress(path: &Path) -> io::Result<()> {
    let mut gz_name = path.as_os_str().to_owned();
    gz_name.push(".gz");
    let mut input = File::open(path)?;
    let out = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&gz_name)?;
    let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    io::copy(&mut input, &mut enc)?;
    enc.finish()?.sync_all()?;
    std::fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_rotate_past_the_size_and_keep_the_newest_backups() {
        let dir = std::env::temp_dir().join(format!("r8s-rotate-{}", fastrand::u64(..)));
        let path = dir.join("logs/audit.log");
        let rotation = Rotation {
            max_bytes: 100,
            max_backups: 2,
            max_age_days: 0,
            compress: false,
        };
        let mut log = Rotating::open(&path, rotation).unwrap();
        let line = [b'x'; 39];
        for _ in 0..12 {
            log.write(&line).unwrap();
            // Backup names have millisecond times: one rotation per name.
            std::thread::sleep(Duration::from_millis(2));
        }
        let kept = backups(&path);
        assert_eq!(kept.len(), 2, "{kept:?}");
        for (p, _) in &kept {
            assert_eq!(std::fs::metadata(p).unwrap().len(), 78, "{}", p.display());
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 78);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn should_name_backups_as_lumberjack_does() {
        let at = humantime::parse_rfc3339("2026-11-28T15:04:05.123Z").unwrap();
        let name = backup_name(Path::new("/var/log/r8s/audit.log"), at);
        assert_eq!(
            name,
            Path::new("/var/log/r8s/audit-2026-11-28T15-04-05.123.log")
        );
        let dir = std::env::temp_dir().join(format!("r8s-backups-{}", fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("audit.log");
        std::fs::write(backup_name(&log, at), b"").unwrap();
        std::fs::write(dir.join("audit-2026-11-28T15-04-05.123.log.gz"), b"").unwrap();
        std::fs::write(dir.join("other-2026-11-28T15-04-05.123.log"), b"").unwrap();
        let mut found: Vec<SystemTime> = backups(&log).into_iter().map(|b| b.1).collect();
        found.dedup();
        assert_eq!(found, vec![at]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn should_compress_backups_when_asked() {
        let dir = std::env::temp_dir().join(format!("r8s-gz-{}", fastrand::u64(..)));
        let path = dir.join("audit.log");
        let rotation = Rotation {
            max_bytes: 10,
            compress: true,
            ..Default::default()
        };
        let mut log = Rotating::open(&path, rotation).unwrap();
        log.write(b"first line\n").unwrap();
        log.write(b"second\n").unwrap();
        let kept = backups(&path);
        assert_eq!(kept.len(), 1);
        let gz = &kept[0].0;
        assert!(
            gz.to_string_lossy().ends_with(".log.gz"),
            "{}",
            gz.display()
        );
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(File::open(gz).unwrap()),
            &mut text,
        )
        .unwrap();
        assert_eq!(text, "first line\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
