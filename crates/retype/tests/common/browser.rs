//! Headless Chromium driven through its DevTools protocol (CDP): JSON
//! messages over one WebSocket, a page attached as a flat session.
//! Timeouts here only guard against a hung browser; no check depends on
//! how fast the machine is. The tests use it through `common`; the
//! report's load-time benchmark (benches/report_load.rs) includes this file.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// Longest wait for one answer or event before the test gives up.
const HUNG: Duration = Duration::from_secs(180);

/// Profiles made by this process, to name the next one.
static PROFILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A page open in a headless Chromium of its own.
pub struct Page {
    chromium: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    /// Events received while waiting for answers, oldest first.
    events: Vec<Value>,
    profile: PathBuf,
}

impl Page {
    /// Starts `browser`, opens `html` in a window `width` × `height` CSS
    /// pixels and waits for its load event.
    pub fn open(browser: &str, html: &Path, width: u32, height: u32) -> Page {
        let profile = std::env::temp_dir().join(format!(
            "retype-chromium-{}-{}",
            std::process::id(),
            PROFILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut chromium = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("chromium starts");
        // Chromium names its WebSocket on stderr once it listens; the rest of
        // stderr is read and dropped, so that its writes never block or fail.
        let mut stderr = BufReader::new(chromium.stderr.take().unwrap())
            .lines()
            .map_while(Result::ok);
        let url = stderr
            .find_map(|l| {
                l.split_once("DevTools listening on ")
                    .map(|(_, u)| u.trim().to_string())
            })
            .expect("chromium prints its DevTools address");
        std::thread::spawn(move || stderr.for_each(drop));
        let (ws, _) = tungstenite::connect(&url).expect("the DevTools WebSocket opens");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(HUNG)).unwrap();
        }
        let mut page = Page {
            chromium,
            ws,
            session: String::new(),
            next: 0,
            events: Vec::new(),
            profile,
        };
        let target = page.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = page.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        page.session = attached["sessionId"].as_str().unwrap().to_string();
        for domain in ["Runtime", "Page", "Log"] {
            page.call(&format!("{domain}.enable"), json!({}));
        }
        page.resize(width, height);
        page.call(
            "Page.navigate",
            json!({"url": format!("file://{}", html.display())}),
        );
        page.wait_for("Page.loadEventFired");
        page
    }

    /// Sends a command to the page (or to the browser before a page is
    /// attached) and returns its result; events that arrive meanwhile are kept.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("send to chromium");
        loop {
            let m = self.receive();
            if m["id"] == json!(id) {
                assert!(m.get("error").is_none(), "{method}: {}", m["error"]);
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    fn receive(&mut self) -> Value {
        loop {
            match self.ws.read().expect("chromium answers (or hung)") {
                Message::Text(t) => return serde_json::from_str(&t).unwrap(),
                Message::Close(_) => panic!("chromium closed the connection"),
                _ => {}
            }
        }
    }

    /// Waits for an event named `method` (one already received counts).
    pub fn wait_for(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i);
        }
        loop {
            let m = self.receive();
            if m["method"] == method {
                return m;
            }
            self.events.push(m);
        }
    }

    /// Evaluates a JavaScript expression (awaiting a promise) and returns
    /// its value; an exception fails the test.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression}\nthrew {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// The window's size in CSS pixels; the page lays itself out again.
    pub fn resize(&mut self, width: u32, height: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// Moves the mouse to `(x, y)` in the window, as a reader would.
    pub fn hover(&mut self, x: f64, y: f64) {
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": x, "y": y}),
        );
    }

    /// Drags the mouse with its left button held from `from` to `to`.
    pub fn drag(&mut self, from: (f64, f64), to: (f64, f64)) {
        for (kind, (x, y)) in [
            ("mouseMoved", from),
            ("mousePressed", from),
            ("mouseMoved", to),
            ("mouseReleased", to),
        ] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1}),
            );
        }
    }

    /// The script errors and error messages the page has logged so far.
    pub fn errors(&mut self) -> Vec<String> {
        // A round trip collects the events sent before it.
        self.eval("0");
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str()? {
                "Runtime.exceptionThrown" => Some(e["params"]["exceptionDetails"].to_string()),
                "Runtime.consoleAPICalled" if e["params"]["type"] == "error" => {
                    Some(e["params"]["args"].to_string())
                }
                "Log.entryAdded" if e["params"]["entry"]["level"] == "error" => {
                    Some(e["params"]["entry"]["text"].to_string())
                }
                _ => None,
            })
            .collect()
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = self.chromium.kill();
        let _ = self.chromium.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
