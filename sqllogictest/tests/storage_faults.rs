//! Storage faults, on real filesystems: a full disk, write permission taken away, the open-file
//! limit reached, I/O errors, and a power cut. Each affected statement gets a clear error
//! (Postgres' SQLSTATE), nothing of it is committed, reads go on, and writes resume by
//! themselves once the cause is gone (a power cut and a dead filesystem: after the restart).
//!
//! They mount filesystems (tmpfs, an ext4 image on a loop device), so they need root. Without
//! it they say so and pass, unless `EDDY_REQUIRE_FAULT_TESTS=1` (set by scripts/test.sh when
//! it runs as root), where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use eddy_sqllogictest::{find_eddy_binary, EddyConfig, EddyProcess};
use tempfile::TempDir;
use tokio_postgres::Client;

/// A statement of about 1 MB of rows, `batch` telling them apart.
fn megabyte_insert(batch: usize) -> String {
    format!(
        "INSERT INTO t SELECT {batch} * 1000 + g, repeat('x', 1000) FROM generate_series(1, 1000) g"
    )
}

async fn count(client: &Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("reads keep working")
        .get(0)
}

/// Runs `sql` until it fails (at most `tries` times); returns the rows acknowledged before
/// and the error.
async fn insert_until_error(client: &Client, tries: usize) -> (i64, tokio_postgres::Error) {
    let mut acknowledged = 0;
    for batch in 0..tries {
        match client.batch_execute(&megabyte_insert(batch)).await {
            Ok(()) => acknowledged += 1000,
            Err(error) => return (acknowledged, error),
        }
    }
    panic!("{tries} inserts of 1 MB all succeeded: the fault was never met");
}

fn code_and_message(error: &tokio_postgres::Error) -> (String, String) {
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {error:?}"));
    (db.code().code().to_string(), db.message().to_string())
}

/// Whether these tests can run here: as root, with `mount`. Says why not when they cannot.
fn can_mount() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if root {
        return true;
    }
    if std::env::var("EDDY_REQUIRE_FAULT_TESTS").is_ok_and(|v| v == "1") {
        panic!("the storage fault tests need root (they mount filesystems)");
    }
    eprintln!("skipping: the storage fault tests need root (they mount tmpfs and ext4 images)");
    false
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
}

/// A mounted filesystem, unmounted when dropped.
struct Mount {
    point: PathBuf,
    /// The ext4 image, for mounting it again.
    image: Option<PathBuf>,
    mounted: bool,
}

impl Mount {
    fn tmpfs(point: &Path, size: &str) -> Self {
        std::fs::create_dir_all(point).unwrap();
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "eddy-test",
                &path(point),
            ],
        );
        Self {
            point: point.to_path_buf(),
            image: None,
            mounted: true,
        }
    }

    /// A new ext4 filesystem of `mib` MiB in an image file, on a loop device.
    fn ext4(point: &Path, image: &Path, mib: u64) -> Self {
        std::fs::create_dir_all(point).unwrap();
        let file = std::fs::File::create(image).unwrap();
        file.set_len(mib << 20).unwrap();
        run("mkfs.ext4", &["-q", "-F", &path(image)]);
        let mut mount = Self {
            point: point.to_path_buf(),
            image: Some(image.to_path_buf()),
            mounted: false,
        };
        mount.mount_again();
        mount
    }

    fn mount_again(&mut self) {
        let image = self.image.as_ref().expect("an image");
        run("mount", &["-o", "loop", &path(image), &path(&self.point)]);
        self.mounted = true;
    }

    fn unmount(&mut self) {
        if self.mounted {
            run("umount", &[&path(&self.point)]);
            self.mounted = false;
        }
    }

    /// Stops the filesystem as a power cut would: nothing more reaches the disk, and the
    /// journal is not flushed (`EXT4_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH`).
    fn cut_power(&self) {
        shut_down(&self.point, 2);
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.point).status();
        }
    }
}

fn path(path: &Path) -> String {
    path.display().to_string()
}

/// `EXT4_IOC_SHUTDOWN` on the filesystem at `point` with `flags` (1: flush the journal first,
/// 2: do not). Every write there fails from then on (EIO).
fn shut_down(point: &Path, flags: u32) {
    // _IOR('X', 125, __u32)
    let script = format!(
        "import fcntl, os, struct\nfd = os.open({:?}, os.O_RDONLY)\nfcntl.ioctl(fd, 0x8004587D, struct.pack('I', {flags}))",
        path(point)
    );
    run("python3", &["-c", &script]);
}

/// A server on `data`, its log beside the mount (never on the filesystem under test).
async fn start(scratch: &Path, data: &Path, adjust: impl FnOnce(&mut EddyConfig)) -> EddyProcess {
    let mut config = EddyConfig::in_dir(find_eddy_binary().unwrap(), scratch);
    config.data_dir = data.to_path_buf();
    adjust(&mut config);
    EddyProcess::start(config).await.unwrap()
}

async fn create_table(client: &Client) {
    client
        .batch_execute("CREATE TABLE t (id BIGINT, pad TEXT)")
        .await
        .unwrap();
}

/// After a fault that is gone: one more statement is committed, a restart brings back exactly
/// the acknowledged rows, and SIGTERM stops the server promptly.
async fn check_recovered(eddy: &mut EddyProcess, client: Client, acknowledged: i64) {
    client
        .batch_execute(&megabyte_insert(9_000))
        .await
        .expect("writes resume once the cause is gone, without a restart");
    assert_eq!(count(&client).await, acknowledged + 1000);
    drop(client);
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(
        count(&client).await,
        acknowledged + 1000,
        "only the acknowledged statements are committed"
    );
    drop(client);
    let stopping = Instant::now();
    eddy.terminate(Duration::from_secs(10)).await.unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_full_disk_answers_53100_reads_go_on_and_writes_resume_when_space_is_freed() {
    if !can_mount() {
        return;
    }
    let scratch = TempDir::new().unwrap();
    let mount = Mount::tmpfs(&scratch.path().join("mnt"), "64m");
    let data = mount.point.join("data");
    let mut eddy = start(scratch.path(), &data, |_| {}).await;
    let (client, _driver) = eddy.connect().await.unwrap();
    create_table(&client).await;

    let (acknowledged, error) = insert_until_error(&client, 200).await;
    let (code, message) = code_and_message(&error);
    assert_eq!(code, "53100", "{message}");
    assert!(message.contains(&path(&data)), "{message}");
    assert!(acknowledged > 0);
    // Reads go on, and see exactly what was acknowledged.
    assert_eq!(count(&client).await, acknowledged);
    let again = client
        .batch_execute(&megabyte_insert(500))
        .await
        .unwrap_err();
    assert_eq!(code_and_message(&again).0, "53100");

    run("mount", &["-o", "remount,size=512m", &path(&mount.point)]);
    check_recovered(&mut eddy, client, acknowledged).await;
}

#[tokio::test]
async fn write_permission_taken_away_answers_42501_and_writes_resume_when_it_is_back() {
    if !can_mount() {
        return;
    }
    let scratch = TempDir::new().unwrap();
    // Root ignores permissions: the server runs as nobody, from a copy of the binary it can
    // reach.
    let (uid, gid) = (65534, 65534);
    let binary = scratch.path().join("eddy");
    std::fs::copy(find_eddy_binary().unwrap(), &binary).unwrap();
    let data = scratch.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    run("chmod", &["755", &path(scratch.path())]);
    run("chown", &[&format!("{uid}:{gid}"), &path(&data)]);
    let mut eddy = start(scratch.path(), &data, |config| {
        config.binary = binary.clone();
        config.run_as = Some((uid, gid));
    })
    .await;
    let (client, _driver) = eddy.connect().await.unwrap();
    create_table(&client).await;
    client.batch_execute(&megabyte_insert(0)).await.unwrap();

    run("chmod", &["-R", "a-w", &path(&data)]);
    // The store writes its journal through a file it holds open; the first file it must
    // create (a memtable flushed to a table file) fails.
    let (acknowledged, error) = insert_until_error(&client, 400).await;
    let (code, message) = code_and_message(&error);
    assert_eq!(code, "42501", "{message}");
    assert!(message.contains(&path(&data)), "{message}");
    assert_eq!(count(&client).await, acknowledged + 1000);

    run("chmod", &["-R", "u+w", &path(&data)]);
    check_recovered(&mut eddy, client, acknowledged + 1000).await;
}

#[tokio::test]
async fn the_open_file_limit_answers_53000_and_writes_resume_when_it_is_raised() {
    if !can_mount() {
        return;
    }
    let scratch = TempDir::new().unwrap();
    let data = scratch.path().join("data");
    let mut eddy = start(scratch.path(), &data, |_| {}).await;
    let (client, _driver) = eddy.connect().await.unwrap();
    create_table(&client).await;
    let pid = eddy.pid().unwrap().to_string();
    // No new file can be opened (the soft limit is what is open now): a memtable flushed to a
    // table file fails.
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    run("prlimit", &["--pid", &pid, &format!("--nofile={open}:")]);
    let (acknowledged, error) = insert_until_error(&client, 400).await;
    let (code, message) = code_and_message(&error);
    assert_eq!(code, "53000", "{message}");
    assert_eq!(count(&client).await, acknowledged);

    run("prlimit", &["--pid", &pid, "--nofile=4096:"]);
    check_recovered(&mut eddy, client, acknowledged).await;
}

#[tokio::test]
async fn a_dead_filesystem_fails_statements_cleanly_and_sigterm_still_stops_the_server() {
    if !can_mount() {
        return;
    }
    let scratch = TempDir::new().unwrap();
    let mut mount = Mount::ext4(
        &scratch.path().join("mnt"),
        &scratch.path().join("fs.img"),
        256,
    );
    let data = mount.point.join("data");
    let mut eddy = start(scratch.path(), &data, |_| {}).await;
    let (client, _driver) = eddy.connect().await.unwrap();
    create_table(&client).await;
    client.batch_execute(&megabyte_insert(0)).await.unwrap();
    // From here every write and fsync on the filesystem fails with EIO (the journal was
    // flushed first: what was acknowledged is on disk).
    shut_down(&mount.point, 1);
    let error = client.batch_execute(&megabyte_insert(1)).await.unwrap_err();
    let (code, message) = code_and_message(&error);
    assert_eq!(code, "58030", "{message}");
    assert_eq!(count(&client).await, 1000);
    drop(client);
    let stopping = Instant::now();
    let _ = eddy.terminate(Duration::from_secs(10)).await.unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        stopping.elapsed()
    );

    mount.unmount();
    mount.mount_again();
    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    assert_eq!(count(&client).await, 1000);
    client.batch_execute(&megabyte_insert(2)).await.unwrap();
    assert_eq!(count(&client).await, 2000);
    drop(client);
    eddy.kill9().unwrap();
}

#[tokio::test]
async fn a_power_cut_loses_no_acknowledged_statement() {
    if !can_mount() {
        return;
    }
    let scratch = TempDir::new().unwrap();
    let mut mount = Mount::ext4(
        &scratch.path().join("mnt"),
        &scratch.path().join("fs.img"),
        256,
    );
    let data = mount.point.join("data");
    let mut eddy = start(scratch.path(), &data, |_| {}).await;
    let (client, _driver) = eddy.connect().await.unwrap();
    client
        .batch_execute("CREATE TABLE acknowledged (id INT)")
        .await
        .unwrap();
    for id in 0..50 {
        client
            .batch_execute(&format!("INSERT INTO acknowledged VALUES ({id})"))
            .await
            .unwrap();
    }
    // The power goes: whatever was not on disk is gone.
    mount.cut_power();
    drop(client);
    eddy.kill9().unwrap();
    mount.unmount();
    mount.mount_again();

    eddy.restart().await.unwrap();
    let (client, _driver) = eddy.connect().await.unwrap();
    let ids: Vec<i32> = client
        .query("SELECT id FROM acknowledged ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids, (0..50).collect::<Vec<_>>());
    drop(client);
    eddy.kill9().unwrap();
}
