//! A headless Chromium for the dashboard's tests, driven through e2e/browser/driver.mjs (Playwright's
//! core library, pinned in e2e/browser/package.json and installed with npm into the cache of the
//! agent CLIs): a [`Browser`] per test, a [`Page`] per tab (a context of its own, or another tab
//! of a page's context: [`Page::new_tab`], [`Page::click_new_tab`]), every wait bounded. A step
//! that fails panics with the page's URL, its console errors and failed requests, and the path of
//! a screenshot taken at that moment.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};

/// Where Chromium is; Debian's `chromium` package puts it there.
pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// How long one step waits unless told otherwise.
pub(crate) const STEP: Duration = Duration::from_secs(15);
/// How long the driver may take to start Chromium on a loaded machine.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(90);
/// What the driver gets on top of a step's own timeout to answer.
const SLACK: Duration = Duration::from_secs(20);
/// How long a closed driver may take to close Chromium before it is killed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The pinned playwright-core, as e2e/browser/package.json names it.
fn playwright_version() -> String {
    let manifest: Value =
        serde_json::from_str(include_str!("../browser/package.json")).expect("e2e/browser/package.json is JSON");
    manifest["dependencies"]["playwright-core"].as_str().expect("playwright-core is pinned").to_string()
}

/// The folder of the playwright-core package, installed with npm first when missing (`make test`
/// installs it before the tests run; one test process installs it once).
fn playwright_core() -> PathBuf {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one = INSTALL.lock();
    let bin = crate::model_agents::npm_cli("playwright-core", &playwright_version(), "playwright-core");
    let dir = bin.parent().expect("node_modules").join("playwright-core");
    assert!(dir.join("index.mjs").is_file(), "{} holds no playwright-core", dir.display());
    dir
}

/// The folder failure screenshots and the driver's log go to.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).expect("create the browser artifacts folder");
    dir
}

/// A name for files of the running test: its thread's name, made safe for a file name.
fn test_name() -> String {
    let name = std::thread::current().name().unwrap_or("test").to_string();
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Runs blocking work on a tokio worker without stalling the runtime's other tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The driver process and its pipes.
struct Driver {
    child: Mutex<Child>,
    io: Mutex<Option<Io>>,
    next: AtomicU64,
    log: PathBuf,
    shots: AtomicU64,
}

struct Io {
    stdin: ChildStdin,
    replies: mpsc::Receiver<Value>,
}

impl Driver {
    /// The last lines the driver wrote to its standard error.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Sends one request and waits `wait` for its answer: the value, or the driver's error.
    fn call(&self, op: &str, mut args: Value, wait: Duration) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        args["id"] = json!(id);
        args["op"] = json!(op);
        blocking(|| {
            let mut io = self.io.lock();
            let Some(io) = io.as_mut() else { return Err("the driver is closed".to_string()) };
            let line = format!("{args}\n");
            if let Err(e) = io.stdin.write_all(line.as_bytes()).and_then(|()| io.stdin.flush()) {
                return Err(format!("the driver does not take requests ({e}); its log:\n{}", self.log_tail()));
            }
            let deadline = Instant::now() + wait;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match io.replies.recv_timeout(left) {
                    // An answer to an earlier request whose wait ran out.
                    Ok(reply) if reply["id"] != json!(id) => continue,
                    Ok(reply) if reply["ok"] == json!(true) => return Ok(reply["value"].clone()),
                    Ok(reply) => return Err(reply["error"].as_str().unwrap_or("no error text").to_string()),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        return Err(format!("the driver did not answer {op} within {wait:?}"))
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(format!("the driver exited; its log:\n{}", self.log_tail()))
                    }
                }
            }
        })
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Closing its input makes the driver close Chromium and exit.
        drop(self.io.lock().take());
        let child = self.child.get_mut();
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while Instant::now() < deadline {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A headless Chromium, closed when dropped.
pub(crate) struct Browser {
    driver: Arc<Driver>,
}

/// How to open a browser context.
#[derive(Clone, Debug, Default)]
pub(crate) struct Options {
    /// Cookies the context starts with, as Playwright's `context.cookies()` gives them.
    pub cookies: Vec<Value>,
    /// The viewport (width, height) in CSS pixels; Playwright's 1280×720 when `None`.
    pub viewport: Option<(u32, u32)>,
    /// Permissions the context grants its pages, as Playwright names them (`notifications`).
    pub permissions: Vec<&'static str>,
    /// Source run in every document of the context before the page's own scripts.
    pub init_script: Option<String>,
}

impl Browser {
    /// Starts the driver and Chromium; panics with the driver's log when it cannot.
    pub(crate) fn launch() -> Browser {
        assert!(Path::new(CHROMIUM).is_file(), "{CHROMIUM} is missing: install Debian's chromium (make test does)");
        let core = playwright_core();
        let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/browser/driver.mjs");
        let log = artifacts().join(format!("{}-driver.log", test_name()));
        let err = std::fs::File::create(&log).expect("create the driver's log");
        let mut child = Command::new("node")
            .arg(&driver)
            .env("AOCTL_PLAYWRIGHT_CORE", &core)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("node {} cannot start: {e}", driver.display()));
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let driver = Driver {
            child: Mutex::new(child),
            io: Mutex::new(None),
            next: AtomicU64::new(1),
            log,
            shots: AtomicU64::new(0),
        };
        match blocking(|| replies.recv_timeout(LAUNCH_TIMEOUT)) {
            Ok(v) if v["ready"] == json!(true) => {}
            other => panic!("the browser driver did not start ({other:?}); its log:\n{}", driver.log_tail()),
        }
        *driver.io.lock() = Some(Io { stdin, replies });
        Browser { driver: Arc::new(driver) }
    }

    /// A new browser context (its own cookies and storage) with one page.
    pub(crate) fn open(&self, opts: Options) -> Page {
        let mut args = json!({"cookies": opts.cookies, "permissions": opts.permissions});
        if let Some((w, h)) = opts.viewport {
            args["viewport"] = json!({"width": w, "height": h});
        }
        if let Some(source) = opts.init_script {
            args["initScript"] = json!(source);
        }
        let id = self.driver.call("open", args, STEP + SLACK).unwrap_or_else(|e| panic!("open a browser context: {e}"));
        Page { driver: self.driver.clone(), id: id.as_str().expect("a page id").to_string() }
    }

    /// The TCP connections the browser's processes hold open (established) to `port` on this
    /// machine, counted from /proc: the sockets of every process below the driver, looked up
    /// in /proc/net/tcp and tcp6. Idle keep-alive connections count too.
    pub(crate) fn connections_to(&self, port: u16) -> usize {
        let root = self.driver.child.lock().id();
        let mut parents = std::collections::HashMap::<u32, u32>::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
            // The fields after the command's closing parenthesis: state, then the parent's pid.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            if let Some(ppid) = ppid {
                parents.insert(pid, ppid);
            }
        }
        let below = |mut pid: u32| loop {
            if pid == root {
                return true;
            }
            match parents.get(&pid) {
                Some(&p) if p != 0 && p != pid => pid = p,
                _ => return false,
            }
        };
        let mut inodes = std::collections::HashSet::new();
        for &pid in parents.keys().filter(|&&p| below(p)) {
            for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten().flatten() {
                let Ok(target) = std::fs::read_link(fd.path()) else { continue };
                let t = target.to_string_lossy();
                if let Some(inode) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                    inodes.insert(inode.to_string());
                }
            }
        }
        let mut n = 0;
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                // local, remote (hex address:port), state (01 established), …, inode (the 10th).
                let (Some(remote), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else { continue };
                let to = remote.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
                if *state == "01" && to == Some(port) && inodes.contains(*inode) {
                    n += 1;
                }
            }
        }
        n
    }
}

/// Where a navigation ended: the main response's status and the page's URL.
#[derive(Clone, Debug)]
pub(crate) struct Nav {
    pub status: Option<u16>,
    pub url: String,
}

/// What a page logged: its console errors, uncaught exceptions among them (as `uncaught: …`).
#[derive(Clone, Debug)]
pub(crate) struct Diagnostics {
    pub console_errors: Vec<String>,
}

/// One page (a tab), closed when dropped; its context closes with its last page.
pub(crate) struct Page {
    driver: Arc<Driver>,
    id: String,
}

/// Milliseconds of a duration, as the driver takes them.
fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().map(|s| s.as_str().unwrap_or_default().to_string()).collect()
}

impl Page {
    /// One request about this page; `Err` is the driver's refusal or its silence.
    pub(crate) fn try_op(&self, op: &str, mut args: Value, timeout: Duration) -> Result<Value, String> {
        args["page"] = json!(self.id);
        args["timeout"] = json!(ms(timeout));
        self.driver.call(op, args, timeout + SLACK)
    }

    /// Like [`Page::try_op`]; a failure panics with what the page shows and logged.
    fn op(&self, op: &str, args: Value, timeout: Duration) -> Value {
        let what = format!("{op} {args}");
        self.try_op(op, args, timeout).unwrap_or_else(|e| self.fail(&what, &e))
    }

    /// What the page logged so far.
    pub(crate) fn diagnostics(&self) -> Diagnostics {
        let d = self.try_op("diagnostics", json!({}), STEP).unwrap_or_else(|e| panic!("diagnostics of a page: {e}"));
        Diagnostics { console_errors: strings(&d["consoleErrors"]) }
    }

    /// Panics with `what` failed, the page's URL, its console errors and failed requests, and a
    /// screenshot of it.
    pub(crate) fn fail(&self, what: &str, error: &str) -> ! {
        let n = self.driver.shots.fetch_add(1, Ordering::Relaxed);
        let shot = artifacts().join(format!("{}-{}-{n}.png", test_name(), self.id));
        let shot = match self.try_op("screenshot", json!({"path": shot, "fullPage": true}), STEP) {
            Ok(_) => shot.display().to_string(),
            Err(e) => format!("none ({e})"),
        };
        let d =
            self.try_op("diagnostics", json!({}), STEP).unwrap_or_else(|e| json!({"url": format!("unknown ({e})")}));
        panic!(
            "browser: {what}: {error}\n  page: {}\n  console errors: {:#?}\n  failed requests: {:#?}\n  screenshot: {shot}",
            d["url"].as_str().unwrap_or_default(),
            strings(&d["consoleErrors"]),
            strings(&d["failedRequests"]),
        )
    }

    /// Navigates to `url` and waits for its `load` event.
    pub(crate) fn goto(&self, url: &str) -> Nav {
        let v = self.op("goto", json!({"url": url}), Duration::from_secs(30));
        Nav { status: v["status"].as_u64().map(|s| s as u16), url: v["url"].as_str().unwrap_or_default().to_string() }
    }

    /// Another tab in this page's browser context (its cookies, its shared workers), at `url`.
    pub(crate) fn new_tab(&self, url: &str) -> Page {
        let id = self.op("newPage", json!({}), STEP);
        let tab = Page { driver: self.driver.clone(), id: id.as_str().expect("a page id").to_string() };
        tab.goto(url);
        tab
    }

    /// Ctrl+clicks `selector`, as a person opening a link in a new tab: that tab, loaded.
    pub(crate) fn click_new_tab(&self, selector: &str) -> Page {
        let id =
            self.op("clickNewPage", json!({"selector": selector, "modifiers": ["Control"]}), Duration::from_secs(30));
        Page { driver: self.driver.clone(), id: id.as_str().expect("a page id").to_string() }
    }

    /// Brings this tab to the front of its window, as a person switching to it.
    pub(crate) fn front(&self) {
        self.op("bringToFront", json!({}), STEP);
    }

    /// Waits until an element matches `selector`.
    pub(crate) fn wait_for(&self, selector: &str, timeout: Duration) {
        self.op("waitForSelector", json!({"selector": selector}), timeout);
    }

    /// Waits until an element matching `selector` is visible.
    pub(crate) fn wait_visible(&self, selector: &str, timeout: Duration) {
        self.op("waitForSelector", json!({"selector": selector, "state": "visible"}), timeout);
    }

    /// Waits until the JavaScript function `function` (source text), called with `arg`, returns a
    /// truthy value; that value.
    pub(crate) fn wait_until(&self, what: &str, function: &str, arg: Value, timeout: Duration) -> Value {
        let args = json!({"expression": function, "arg": arg});
        self.try_op("waitForFunction", args, timeout).unwrap_or_else(|e| self.fail(what, &e))
    }

    pub(crate) fn click(&self, selector: &str) {
        self.op("click", json!({"selector": selector}), STEP);
    }

    pub(crate) fn fill(&self, selector: &str, value: &str) {
        self.op("fill", json!({"selector": selector, "value": value}), STEP);
    }

    /// Types `text` with the keyboard into whatever has the focus.
    pub(crate) fn type_text(&self, text: &str) {
        self.op("type", json!({"text": text, "delay": 20}), STEP);
    }

    /// Presses one key (Playwright's names: `Enter`, `Control+C`).
    pub(crate) fn press(&self, key: &str) {
        self.op("press", json!({"key": key}), STEP);
    }

    /// The text content of the first element matching `selector`, waiting for one.
    pub(crate) fn text(&self, selector: &str) -> String {
        self.op("text", json!({"selector": selector}), STEP).as_str().unwrap_or_default().to_string()
    }

    /// An attribute of the first element matching `selector`, waiting for one.
    pub(crate) fn attribute(&self, selector: &str, name: &str) -> Option<String> {
        self.op("attribute", json!({"selector": selector, "name": name}), STEP).as_str().map(str::to_string)
    }

    /// How many elements match `selector` now.
    pub(crate) fn count(&self, selector: &str) -> u64 {
        self.op("count", json!({"selector": selector}), STEP).as_u64().unwrap_or(0)
    }

    /// Evaluates the JavaScript function `function` (source text) with `arg`, awaiting a promise it
    /// returns; its JSON value.
    pub(crate) fn eval(&self, function: &str, arg: Value) -> Value {
        self.op("evaluate", json!({"expression": function, "arg": arg}), STEP)
    }

    /// [`Page::eval`] with a timeout of its own, for functions that wait.
    pub(crate) fn eval_for(&self, function: &str, arg: Value, timeout: Duration) -> Value {
        self.op("evaluate", json!({"expression": function, "arg": arg}), timeout)
    }

    /// The cookies of the page's context.
    pub(crate) fn cookies(&self) -> Vec<Value> {
        self.op("cookies", json!({}), STEP).as_array().cloned().unwrap_or_default()
    }

    /// A screenshot of the viewport (or of the whole page) as a PNG at `path`.
    pub(crate) fn screenshot(&self, path: &Path, full_page: bool) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the screenshot's folder");
        }
        self.op("screenshot", json!({"path": path, "fullPage": full_page}), Duration::from_secs(30));
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.driver.call("close", json!({"page": self.id}), Duration::from_secs(10));
    }
}
