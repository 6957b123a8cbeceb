//! A scripted stand-in for an agent CLI's model API: it answers each turn of the CLI's agent loop
//! with the next tool call of a script, and keeps what the CLI sent (the tools' results among it).
//! Claude Code speaks Anthropic's Messages API (`ANTHROPIC_BASE_URL`), Gemini CLI Google's
//! Gemini API (`GOOGLE_GEMINI_BASE_URL`), the Codex CLI OpenAI's Responses API (a model provider's
//! `base_url`), each streamed as server-sent events.
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One turn of the script: the model asks the CLI to run tool `name` with `input`.
pub struct ToolCall {
    pub name: &'static str,
    pub input: Value,
}

/// What the CLI sent back for one tool call.
#[derive(Clone, Debug)]
pub struct ToolResult {
    pub text: String,
    pub is_error: bool,
}

/// Which model API a CLI speaks.
#[derive(Clone, Copy)]
enum Api {
    Anthropic,
    Gemini,
    Responses,
}

pub struct ScriptedModel {
    /// The base URL to give the CLI.
    pub url: String,
    api: Api,
    requests: Arc<Mutex<Vec<Value>>>,
    stop: Arc<AtomicBool>,
}

impl ScriptedModel {
    /// Serves Anthropic's Messages API on a port of 127.0.0.1 until dropped. A request offering
    /// the `Bash` tool is a turn of the agent loop: it gets the script's call number n, n being
    /// the tool results the conversation holds, then a final "done"; any other request (a title,
    /// a summary) gets "ok".
    pub fn anthropic(script: Vec<ToolCall>) -> Self {
        Self::serve(Api::Anthropic, script)
    }

    /// Serves the Gemini API the same way: a request offering `run_shell_command` is a turn of
    /// the agent loop; another (Gemini CLI routes each prompt by a complexity score first) gets
    /// the JSON its response schema asks for, each field its first choice or a placeholder.
    pub fn gemini(script: Vec<ToolCall>) -> Self {
        Self::serve(Api::Gemini, script)
    }

    /// Serves OpenAI's Responses API the same way: a request offering `exec_command` is a turn
    /// of the agent loop, another gets "ok".
    pub fn responses(script: Vec<ToolCall>) -> Self {
        Self::serve(Api::Responses, script)
    }

    fn serve(api: Api, script: Vec<ToolCall>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(script);
        let (seen, stopped) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || serve(api, stream, &seen, &script));
            }
        });
        ScriptedModel { url, api, requests, stop }
    }

    /// How many requests the CLI sent so far.
    pub fn seen(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// Every request body the CLI sent, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The results of the script's tool calls the CLI sent back, in the script's order.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let (api, requests) = (self.api, self.requests());
        let turns = requests.iter().filter(|r| is_turn(api, r));
        let Some(last) = turns.max_by_key(|r| results(api, r).len()) else {
            return Vec::new();
        };
        results(api, last)
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

/// Whether `request` is a turn of the agent loop: it offers the CLI's shell tool.
fn is_turn(api: Api, request: &Value) -> bool {
    let tools = request["tools"].as_array().into_iter().flatten();
    match api {
        Api::Anthropic => tools.clone().any(|t| t["name"] == "Bash"),
        Api::Gemini => tools
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .any(|f| f["name"] == "run_shell_command"),
        Api::Responses => tools.clone().any(|t| t["name"] == "exec_command"),
    }
}

/// The tool results of a request's conversation, in order.
fn results(api: Api, request: &Value) -> Vec<ToolResult> {
    if let Api::Gemini = api {
        let contents = request["contents"].as_array().cloned().unwrap_or_default();
        let parts = contents.iter().filter_map(|c| c["parts"].as_array()).flatten();
        return parts
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| {
                let response = &r["response"];
                let is_error = response.get("error").is_some();
                ToolResult { text: response.to_string(), is_error }
            })
            .collect();
    }
    if let Api::Responses = api {
        let items = request["input"].as_array().cloned().unwrap_or_default();
        return items
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| {
                let text = match &i["output"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                ToolResult { text, is_error: false }
            })
            .collect();
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let blocks = messages.iter().filter_map(|m| m["content"].as_array()).flatten();
    blocks
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => {
                    parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
                }
                _ => String::new(),
            };
            ToolResult { text, is_error: b["is_error"] == true }
        })
        .collect()
}

/// Answers the requests of one connection (HTTP/1.1, kept alive) until it closes.
fn serve(api: Api, stream: TcpStream, seen: &Mutex<Vec<Value>>, script: &[ToolCall]) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (kind, reply) = match api {
            Api::Anthropic => answer(&path, &request, script),
            Api::Gemini => answer_gemini(&path, &request, script),
            Api::Responses => answer_responses(&request, script),
        };
        seen.lock().unwrap().push(request);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        if writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&reply)).is_err() {
            return;
        }
    }
}

/// The reply to one request: its content type and body.
fn answer(path: &str, request: &Value, script: &[ToolCall]) -> (&'static str, Vec<u8>) {
    if !path.starts_with("/v1/messages") || path.contains("count_tokens") {
        return ("application/json", json!({"input_tokens": 1}).to_string().into_bytes());
    }
    let turn = results(Api::Anthropic, request).len();
    let is_turn = is_turn(Api::Anthropic, request);
    let (block, stop) = match script.get(turn) {
        Some(call) if is_turn => (
            json!({"type": "tool_use", "id": format!("toolu_{turn}"), "name": call.name, "input": call.input}),
            "tool_use",
        ),
        _ => (json!({"type": "text", "text": if is_turn { "done" } else { "ok" }}), "end_turn"),
    };
    let model = request["model"].as_str().unwrap_or("scripted");
    let usage = json!({"input_tokens": 1, "output_tokens": 1});
    let message = |content: Value, stop: Value| {
        json!({"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
               "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
    };
    if request["stream"] != true {
        return ("application/json", message(json!([block]), json!(stop)).to_string().into_bytes());
    }
    // The same message, streamed: its one block opened empty, then filled by one delta.
    let (start, delta) = match block["type"].as_str() {
        Some("text") => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        ),
        _ => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        ),
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": message(json!([]), Value::Null)}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": delta})),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String =
        events.iter().map(|(event, data)| format!("event: {event}\ndata: {data}\n\n")).collect();
    ("text/event-stream", body.into_bytes())
}

/// The reply to one Gemini API request: its content type and body.
fn answer_gemini(path: &str, request: &Value, script: &[ToolCall]) -> (&'static str, Vec<u8>) {
    let usage = json!({"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2});
    let reply = |parts: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
               "index": 0}], "usageMetadata": usage})
    };
    if !is_turn(Api::Gemini, request) {
        let schema = &request["generationConfig"]["responseJsonSchema"];
        let text = match schema["properties"].as_object() {
            Some(properties) => Value::Object(
                properties.iter().map(|(name, p)| (name.clone(), placeholder(p))).collect(),
            )
            .to_string(),
            None => "ok".to_owned(),
        };
        let body = reply(json!([{ "text": text }])).to_string();
        return match path.contains("streamGenerateContent") {
            true => ("text/event-stream", format!("data: {body}\r\n\r\n").into_bytes()),
            false => ("application/json", body.into_bytes()),
        };
    }
    let turn = results(Api::Gemini, request).len();
    let part = match script.get(turn) {
        Some(call) => json!({"functionCall": {"name": call.name, "args": call.input}}),
        None => json!({"text": "done"}),
    };
    let body = reply(json!([part])).to_string();
    ("text/event-stream", format!("data: {body}\r\n\r\n").into_bytes())
}

/// A value a JSON schema property accepts: its first choice, or one of its type.
fn placeholder(property: &Value) -> Value {
    if let Some(first) = property["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match property["type"].as_str().map(str::to_ascii_lowercase).as_deref() {
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("scripted"),
    }
}

/// The reply to one Responses API request: its content type and body.
fn answer_responses(request: &Value, script: &[ToolCall]) -> (&'static str, Vec<u8>) {
    let turn = results(Api::Responses, request).len();
    let text = |text: &str| {
        json!({"type": "message", "id": format!("msg_{turn}"), "role": "assistant",
               "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let item = match script.get(turn) {
        Some(call) if is_turn(Api::Responses, request) => json!({
            "type": "function_call", "id": format!("fc_{turn}"), "call_id": format!("call_{turn}"),
            "name": call.name, "arguments": call.input.to_string(), "status": "completed"}),
        _ if is_turn(Api::Responses, request) => text("done"),
        _ => text("ok"),
    };
    let id = format!("resp_{turn}");
    let usage = json!({"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 2});
    let events = [
        json!({"type": "response.created", "response": {"id": id, "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed",
               "response": {"id": id, "status": "completed", "output": [item], "usage": usage}}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    ("text/event-stream", body.into_bytes())
}
