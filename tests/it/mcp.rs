//! `ccl-bench mcp` spoken to as any MCP client speaks to it: JSON-RPC
//! messages, one per line, on its stdin and stdout. (The Python tests drive it
//! with the protocol's own client; this one needs no Python.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use crate::support::{run, sample, stdout};

struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ccl-bench"))
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ccl-bench mcp starts");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            input,
            output,
            next: 1,
        };
        let init = s.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "ccl-bench tests", "version": "0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "ccl-bench", "{init}");
        assert!(init["result"]["instructions"].is_string());
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.input, "{msg}").unwrap();
        self.input.flush().unwrap();
    }

    /// Sends a request and reads until its response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "server closed"
            );
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == id {
                return msg;
            }
        }
    }

    /// A tool's result: (is it an error, its structured answer or text).
    fn call(&mut self, tool: &str, args: Value) -> (bool, Value) {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &r["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let error = result["isError"] == true;
        let answer = match error {
            true => Value::String(text.to_owned()),
            false => {
                // The structured answer and its text are one document.
                let doc: Value = serde_json::from_str(text).unwrap();
                assert_eq!(result["structuredContent"], doc);
                doc
            }
        };
        (error, answer)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli_json(args: &[&str]) -> Value {
    let o = run(args);
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn tools_answer_with_the_clis_json_and_bad_input_is_a_tool_error() {
    let mut s = Server::start();
    let tools = s.request("tools/list", json!({}));
    let mut names: Vec<&str> = (tools["result"]["tools"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "collectives",
            "compare",
            "gate",
            "hang",
            "list_metrics",
            "metrics",
            "open_run",
            "ops",
            "stragglers"
        ]
    );
    let path = sample();
    let p = path.to_str().unwrap();
    let (err, overview) = s.call("open_run", json!({"path": p}));
    assert!(!err);
    assert_eq!(overview, cli_json(&["overview", p, "--format", "json"]));
    assert_eq!(overview["straggler"]["rank"], 5);
    // A bad path, then a step the rank lacks: tool errors with the command
    // line's words; the server answers the next call.
    let (err, why) = s.call("open_run", json!({"path": "/no/such/run"}));
    assert!(
        err && why.as_str().unwrap().contains("/no/such/run"),
        "{why}"
    );
    let (err, why) = s.call("ops", json!({"path": p, "rank": 0, "step": 99}));
    assert!(err, "{why}");
    assert!(
        why.as_str().unwrap().contains("rank 0 has no step 99"),
        "{why}"
    );
    let (err, m) = s.call(
        "metrics",
        json!({"path": p, "names": ["avg_step_time", "peak_memory_allocated_gb"]}),
    );
    assert!(!err);
    let whole = cli_json(&["--trace", p, "--metrics", "--format", "json"]);
    for got in m["metrics"].as_array().unwrap() {
        let want = whole["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == got["name"])
            .unwrap();
        assert_eq!(got, want);
    }
    // What the run cannot answer comes with the reason.
    assert!(m["metrics"][1]["value"].is_null());
    assert!(m["metrics"][1]["not_applicable"].is_string());
    let (err, st) = s.call("stragglers", json!({"path": p, "top": 3}));
    assert!(!err);
    assert_eq!(
        st,
        cli_json(&["stragglers", p, "--top", "3", "--format", "json"])
    );
    // Arguments the tool does not take are refused, not ignored.
    let r = s.request(
        "tools/call",
        json!({"name": "ops", "arguments": {"path": p, "rank": 0, "stpe": 2}}),
    );
    assert!(
        r.get("error").is_some() || r["result"]["isError"] == true,
        "{r}"
    );
    let (err, _) = s.call("list_metrics", json!({}));
    assert!(!err);
}
