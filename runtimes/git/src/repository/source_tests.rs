//! Tests of fetching and reading a GitSource's repository, against real bare repositories made
//! in temporary folders (and one served over git's smart HTTP by `git http-backend`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A bare repository (`origin.git`), a working clone that pushes to it, and a cache folder.
struct Upstream {
    tmp: tempfile::TempDir,
}

impl Upstream {
    fn new() -> Upstream {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("origin.git")).unwrap();
        std::fs::create_dir_all(tmp.path().join("work")).unwrap();
        git(&tmp.path().join("origin.git"), &["init", "-q", "--bare", "-b", "main"]);
        let up = Upstream { tmp };
        git(&up.work(), &["init", "-q", "-b", "main"]);
        git(&up.work(), &["remote", "add", "origin", up.origin().to_str().unwrap()]);
        up
    }

    fn origin(&self) -> PathBuf {
        self.tmp.path().join("origin.git")
    }

    fn url(&self) -> String {
        self.origin().to_str().unwrap().to_string()
    }

    fn work(&self) -> PathBuf {
        self.tmp.path().join("work")
    }

    fn cache(&self) -> PathBuf {
        self.tmp.path().join("cache").join("fleet")
    }

    /// Writes (`Some`) or removes (`None`) files, commits and pushes; the new commit.
    fn commit(&self, files: &[(&str, Option<&[u8]>)]) -> String {
        let work = self.work();
        for (path, text) in files {
            match text {
                Some(t) => {
                    std::fs::create_dir_all(work.join(path).parent().unwrap()).unwrap();
                    std::fs::write(work.join(path), t).unwrap();
                    git(&work, &["add", "--", path]);
                }
                None => {
                    git(&work, &["rm", "-q", "--", path]);
                }
            }
        }
        git(&work, &["commit", "-q", "--allow-empty", "-m", "change"]);
        git(&work, &["push", "-q", "--force", "origin", "HEAD:main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    fn fetch(&self, reference: &SourceRef) -> Result<Fetched, SourceError> {
        let url = self.url();
        fetch(&self.cache(), &FetchRequest { url: &url, reference, token: None, limits: FetchLimits::default() })
    }

    fn read(&self, commit: &str, folder: &str) -> Result<Vec<ManifestFile>, SourceError> {
        read_manifests(&self.cache(), commit, folder, &ReadLimits::default())
    }
}

fn main() -> SourceRef {
    SourceRef::Branch("main".into())
}

fn paths(files: &[ManifestFile]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn follows_a_branch_that_adds_changes_and_removes_files() {
    let up = Upstream::new();
    let first = up.commit(&[
        ("sessions/b.yml", Some(b"kind: Session\nmetadata: {name: b}\n")),
        ("sessions/a.yaml", Some(b"kind: Session\nmetadata: {name: a}\n")),
        ("sessions/nested/c.json", Some(b"{\"kind\": \"Session\"}")),
        ("sessions/README.md", Some(b"not a manifest")),
        ("sessions/.yaml", Some(b"only an extension")),
        ("sessions/.hidden.yaml", Some(b"a hidden file")),
        (".github/workflows/ci.yml", Some(b"on: push")),
        ("other/x.yaml", Some(b"kind: Project\n")),
    ]);
    let got = up.fetch(&main()).unwrap();
    assert_eq!(got.commit, first);
    assert_eq!(got.revision, format!("main@sha1:{first}"));
    let files = up.read(&first, "sessions/").unwrap();
    assert_eq!(paths(&files), ["sessions/a.yaml", "sessions/b.yml", "sessions/nested/c.json"]);
    assert_eq!(files[0].text, "kind: Session\nmetadata: {name: a}\n");
    assert_eq!(paths(&up.read(&first, "").unwrap()).len(), 4, "the root reads every folder");
    assert_eq!(up.read(&first, "./other").unwrap()[0].path, "other/x.yaml");

    // A second fetch of an unchanged branch resolves to the same commit.
    assert_eq!(up.fetch(&main()).unwrap().commit, first);

    let second = up.commit(&[
        ("sessions/a.yaml", Some(b"kind: Session\nmetadata: {name: a2}\n")),
        ("sessions/b.yml", None),
        ("sessions/d.yaml", Some(b"kind: Session\n")),
    ]);
    let got = up.fetch(&main()).unwrap();
    assert_eq!(got.revision, format!("main@sha1:{second}"));
    let files = up.read(&second, "sessions").unwrap();
    assert_eq!(paths(&files), ["sessions/a.yaml", "sessions/d.yaml", "sessions/nested/c.json"]);
    assert!(files[0].text.contains("a2"));
    // The earlier commit is still in the cache, as it was.
    assert_eq!(paths(&up.read(&first, "sessions").unwrap())[1], "sessions/b.yml");
}

#[test]
fn follows_a_force_push_that_rewrites_history() {
    let up = Upstream::new();
    let base = up.commit(&[("a.yaml", Some(b"one"))]);
    let old = up.commit(&[("b.yaml", Some(b"two"))]);
    assert_eq!(up.fetch(&main()).unwrap().commit, old);
    git(&up.work(), &["reset", "-q", "--hard", &base]);
    let new = up.commit(&[("c.yaml", Some(b"three"))]);
    let got = up.fetch(&main()).unwrap();
    assert_eq!(got.commit, new, "the rewritten branch is followed");
    assert_eq!(paths(&up.read(&new, "").unwrap()), ["a.yaml", "c.yaml"]);
}

#[test]
fn a_repository_that_disappears_is_a_fetch_error_and_the_cache_stays_readable() {
    let up = Upstream::new();
    let sha = up.commit(&[("a.yaml", Some(b"one"))]);
    up.fetch(&main()).unwrap();
    std::fs::remove_dir_all(up.origin()).unwrap();
    let err = up.fetch(&main()).unwrap_err();
    assert_eq!(err.reason(), "FetchFailed", "{err}");
    assert!(err.is_fetch());
    assert!(err.to_string().contains(&up.url()), "{err}");
    assert_eq!(paths(&up.read(&sha, "").unwrap()), ["a.yaml"]);
}

#[test]
fn a_missing_ref_is_a_typed_error_even_when_the_cache_has_it() {
    let up = Upstream::new();
    up.commit(&[("a.yaml", Some(b"one"))]);
    let err = up.fetch(&SourceRef::Branch("nope".into())).unwrap_err();
    assert_eq!(err.reason(), "RefNotFound");
    assert_eq!(err.to_string(), format!("{}: branch `nope` not found", up.url()));
    assert_eq!(up.fetch(&SourceRef::Tag("v9".into())).unwrap_err().reason(), "RefNotFound");
    for bad in ["a:b", "*", "x..y", ""] {
        assert_eq!(up.fetch(&SourceRef::Branch(bad.into())).unwrap_err().reason(), "BadRef", "{bad}");
    }

    // A branch fetched once and then deleted on the server is gone, whatever the cache holds.
    git(&up.work(), &["push", "-q", "origin", "HEAD:refs/heads/topic"]);
    up.fetch(&SourceRef::Branch("topic".into())).unwrap();
    git(&up.work(), &["push", "-q", "origin", ":refs/heads/topic"]);
    assert_eq!(up.fetch(&SourceRef::Branch("topic".into())).unwrap_err().reason(), "RefNotFound");
}

#[test]
fn follows_lightweight_annotated_and_moved_tags() {
    let up = Upstream::new();
    let one = up.commit(&[("a.yaml", Some(b"one"))]);
    git(&up.work(), &["tag", "v1"]);
    git(&up.work(), &["tag", "-a", "-m", "release", "v2"]);
    git(&up.work(), &["push", "-q", "origin", "v1", "v2"]);
    let two = up.commit(&[("a.yaml", Some(b"two"))]);
    for tag in ["v1", "v2"] {
        let got = up.fetch(&SourceRef::Tag(tag.into())).unwrap();
        assert_eq!(got.commit, one, "{tag} peels to its commit");
        assert_eq!(got.revision, format!("{tag}@sha1:{one}"));
    }
    git(&up.work(), &["tag", "-f", "v1"]);
    git(&up.work(), &["push", "-q", "--force", "origin", "v1"]);
    assert_eq!(up.fetch(&SourceRef::Tag("v1".into())).unwrap().commit, two, "a moved tag is followed");
}

#[test]
fn finds_a_commit_by_full_or_abbreviated_id() {
    let up = Upstream::new();
    let one = up.commit(&[("a.yaml", Some(b"one"))]);
    up.commit(&[("a.yaml", Some(b"two"))]);
    let got = up.fetch(&SourceRef::Commit(one.clone())).unwrap();
    assert_eq!(got, Fetched { commit: one.clone(), revision: format!("sha1:{one}") });
    assert_eq!(up.fetch(&SourceRef::Commit(one[..10].into())).unwrap().commit, one);
    assert_eq!(up.read(&one, "").unwrap()[0].text, "one");
    for bad in ["0000000000000000000000000000000000000000", "abc", "not hex", "deadbeef"] {
        let err = up.fetch(&SourceRef::Commit(bad.into())).unwrap_err();
        assert_eq!(err.reason(), "RefNotFound", "{bad}: {err}");
    }
}

#[test]
fn a_folder_that_does_not_exist_or_climbs_out_is_refused() {
    let up = Upstream::new();
    let sha = up.commit(&[("sessions/a.yaml", Some(b"one"))]);
    up.fetch(&main()).unwrap();
    let err = up.read(&sha, "clusters/prod").unwrap_err();
    assert_eq!(err.reason(), "PathNotFound");
    assert!(!err.is_fetch());
    assert_eq!(err.to_string(), format!("`clusters/prod`: no such folder in {sha}"));
    assert_eq!(up.read(&sha, "sessions/a.yaml").unwrap_err().reason(), "PathNotFound", "a file is no folder");
    assert_eq!(up.read(&sha, "sessions/../..").unwrap_err().reason(), "BadPath");
    assert_eq!(up.read(&sha, "/sessions/").unwrap().len(), 1, "leading and trailing slashes are dropped");
}

#[test]
fn a_file_that_is_not_utf8_is_named() {
    let up = Upstream::new();
    let sha = up.commit(&[("ok.yaml", Some(b"fine")), ("sessions/bad.yaml", Some(b"name: \xff\xfe\n"))]);
    up.fetch(&main()).unwrap();
    let err = up.read(&sha, "").unwrap_err();
    assert_eq!(err.reason(), "NotUtf8");
    assert_eq!(err.to_string(), "sessions/bad.yaml: not UTF-8 text");
}

#[cfg(unix)]
#[test]
fn a_symlink_named_like_a_manifest_is_refused_and_others_are_skipped() {
    let up = Upstream::new();
    up.commit(&[("real.yaml", Some(b"kind: Session\n"))]);
    std::os::unix::fs::symlink("real.yaml", up.work().join("other")).unwrap();
    git(&up.work(), &["add", "other"]);
    let sha = up.commit(&[]);
    up.fetch(&main()).unwrap();
    assert_eq!(paths(&up.read(&sha, "").unwrap()), ["real.yaml"], "a symlink with another name is skipped");

    std::os::unix::fs::symlink("real.yaml", up.work().join("link.yaml")).unwrap();
    git(&up.work(), &["add", "link.yaml"]);
    let sha = up.commit(&[]);
    up.fetch(&main()).unwrap();
    let err = up.read(&sha, "").unwrap_err();
    assert_eq!(err.to_string(), "link.yaml: a symbolic link; manifests must be regular files");
}

#[test]
fn sizes_are_bounded_per_file_and_in_total() {
    let up = Upstream::new();
    let sha = up.commit(&[("a.yaml", Some(&[b'a'; 600])), ("b.yaml", Some(&[b'b'; 600]))]);
    up.fetch(&main()).unwrap();
    let read = |max_file_bytes, max_total_bytes| {
        read_manifests(&up.cache(), &sha, "", &ReadLimits { max_file_bytes, max_total_bytes })
    };
    assert_eq!(read(600, 1200).unwrap().len(), 2, "the limits are inclusive");
    let err = read(599, 10_000).unwrap_err();
    assert_eq!(err.to_string(), "a.yaml: 600 bytes, more than the 599 a manifest file may have");
    assert_eq!(read(1000, 1000).unwrap_err().reason(), "ManifestsTooLarge");
}

#[test]
fn the_fetch_is_bounded_in_bytes_and_time() {
    let up = Upstream::new();
    // Xorshift bytes, which do not compress.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    up.commit(&[("noise.bin", Some(&noise))]);
    let url = format!("file://{}", up.url());
    let limits = FetchLimits { timeout: Duration::from_secs(60), max_bytes: 10_000 };
    let err = fetch(&up.cache(), &FetchRequest { url: &url, reference: &main(), token: None, limits }).unwrap_err();
    assert_eq!(err.reason(), "FetchTooLarge", "{err}");
    let limits = FetchLimits { timeout: Duration::ZERO, max_bytes: u64::MAX };
    let err = fetch(&up.cache(), &FetchRequest { url: &url, reference: &main(), token: None, limits }).unwrap_err();
    assert_eq!(err.reason(), "FetchTimeout", "{err}");
    let limits = FetchLimits::default();
    fetch(&up.cache(), &FetchRequest { url: &url, reference: &main(), token: None, limits }).unwrap();
}

#[test]
fn a_file_url_works_and_other_schemes_are_refused() {
    let up = Upstream::new();
    let sha = up.commit(&[("a.yaml", Some(b"one"))]);
    let url = format!("file://{}", up.url());
    let limits = FetchLimits::default();
    let got = fetch(&up.cache(), &FetchRequest { url: &url, reference: &main(), token: None, limits }).unwrap();
    assert_eq!(got.commit, sha);
    for (url, reason) in [
        ("ssh://git@example.com/org/fleet.git", "UnsupportedScheme"),
        ("git@example.com:org/fleet.git", "UnsupportedScheme"),
        ("git://example.com/org/fleet.git", "UnsupportedScheme"),
        ("fleet.git", "RelativePath"),
        ("./fleet", "RelativePath"),
        ("https://user:secret@example.com/org/fleet.git", "CredentialsInUrl"),
    ] {
        let err = fetch(&up.cache(), &FetchRequest { url, reference: &main(), token: None, limits }).unwrap_err();
        assert_eq!(err.reason(), reason, "{url}");
        assert!(err.is_fetch());
    }
    assert!(check_url("https://example.com/org/fleet.git").is_ok());
    assert!(check_url("HTTP://example.com/a@b").is_ok(), "an @ in the path is no credential");
}

#[test]
fn stale_locks_of_a_killed_fetch_do_not_block_the_next() {
    let up = Upstream::new();
    up.commit(&[("a.yaml", Some(b"one"))]);
    up.fetch(&main()).unwrap();
    let sha = up.commit(&[("a.yaml", Some(b"two"))]);
    std::fs::write(up.cache().join("refs/heads/main.lock"), "").unwrap();
    std::fs::write(up.cache().join("packed-refs.lock"), "").unwrap();
    assert_eq!(up.fetch(&main()).unwrap().commit, sha);
}

#[test]
fn a_broken_cache_is_a_cache_error() {
    let up = Upstream::new();
    up.commit(&[("a.yaml", Some(b"one"))]);
    std::fs::create_dir_all(up.cache()).unwrap();
    std::fs::write(up.cache().join("HEAD"), "garbage").unwrap();
    assert_eq!(up.fetch(&main()).unwrap_err().reason(), "CacheError");
}

/// Standard base64 of `bytes`, for the `Authorization` header the test server expects.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// The requests a server saw: each one's request line and `Authorization` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A smart-HTTP git server on 127.0.0.1: `git http-backend` run as a CGI program for each request,
/// serving the repositories of a folder to requests carrying the expected Basic credentials.
struct HttpServer {
    port: u16,
    stop: Arc<AtomicBool>,
    seen: Seen,
}

impl HttpServer {
    fn start(root: &Path, token: &str) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Seen = Arc::new(Mutex::new(vec![]));
        let want = format!("Basic {}", base64(format!("{TOKEN_USER}:{token}").as_bytes()));
        let (root, stop2, seen2) = (root.to_path_buf(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (root, want, seen) = (root.clone(), want.clone(), seen2.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(conn, &root, &want, &seen);
                });
            }
        });
        HttpServer { port, stop, seen }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers the requests of one connection (kept alive) until the client closes it.
fn serve_one(
    conn: TcpStream,
    root: &Path,
    want: &str,
    seen: &Mutex<Vec<(String, Option<String>)>>,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let request = line.trim_end().to_string();
        let mut headers = vec![];
        loop {
            let mut h = String::new();
            reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut body = vec![];
        if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                reader.read_line(&mut size)?;
                let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(len, 0);
            reader.read_exact(&mut body)?;
        }
        seen.lock().push((request.clone(), header("authorization")));
        if header("authorization").as_deref() != Some(want) {
            let text = "authentication required\n";
            write!(
                conn,
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            )?;
            continue;
        }
        let mut parts = request.split(' ');
        let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut cgi = Command::new("git")
            .arg("http-backend")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", root)
            .env("GIT_PROJECT_ROOT", root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("REQUEST_METHOD", method)
            .env("PATH_INFO", path)
            .env("QUERY_STRING", query)
            .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("HTTP_CONTENT_ENCODING", header("content-encoding").unwrap_or_default())
            .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
            .env("REMOTE_USER", TOKEN_USER)
            .env("REMOTE_ADDR", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut stdin = cgi.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(&body));
        let out = cgi.wait_with_output()?;
        let _ = writer.join();
        let split = out.stdout.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
        let split = split.or_else(|| out.stdout.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
        let (at, skip) = split.unwrap_or((0, 0));
        let (head, payload) = (String::from_utf8_lossy(&out.stdout[..at]).to_string(), &out.stdout[at + skip..]);
        let mut status = "200 OK".to_string();
        let mut reply = String::new();
        for h in head.lines().map(str::trim).filter(|h| !h.is_empty()) {
            match h.strip_prefix("Status:") {
                Some(s) => status = s.trim().to_string(),
                None => reply.push_str(&format!("{h}\r\n")),
            }
        }
        write!(conn, "HTTP/1.1 {status}\r\n{reply}Content-Length: {}\r\n\r\n", payload.len())?;
        conn.write_all(payload)?;
    }
}

#[test]
fn fetches_over_smart_http_with_a_token_in_the_authorization_header() {
    let up = Upstream::new();
    let sha = up.commit(&[("sessions/a.yaml", Some(b"kind: Session\n"))]);
    let token = "s3cret-t0ken";
    let server = HttpServer::start(up.tmp.path(), token);
    let url = format!("http://127.0.0.1:{}/origin.git", server.port);
    let limits = FetchLimits { timeout: Duration::from_secs(60), ..FetchLimits::default() };
    let main = main();
    let request = |token| FetchRequest { url: &url, reference: &main, token, limits };

    let got = fetch(&up.cache(), &request(Some(token))).unwrap();
    assert_eq!(got.commit, sha);
    assert_eq!(paths(&up.read(&sha, "sessions").unwrap()), ["sessions/a.yaml"]);
    let newer = up.commit(&[("sessions/b.yaml", Some(b"kind: Session\n"))]);
    assert_eq!(fetch(&up.cache(), &request(Some(token))).unwrap().commit, newer);

    let err = fetch(&up.cache(), &request(None)).unwrap_err();
    assert_eq!(err.reason(), "AuthRequired", "{err}");
    let err = fetch(&up.cache(), &request(Some("wrong-token"))).unwrap_err();
    assert_eq!(err.reason(), "AuthRefused", "{err}");
    assert!(!err.to_string().contains("wrong-token"), "{err}");

    let seen = server.seen.lock().clone();
    assert!(seen.iter().any(|(_, auth)| auth.as_deref().is_some_and(|a| a.starts_with("Basic "))), "{seen:?}");
    assert!(seen.iter().all(|(line, _)| !line.contains(token) && !line.contains("wrong-token")), "{seen:?}");
}
