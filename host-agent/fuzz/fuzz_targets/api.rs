//! Fuzz target: the agent's API request parser (`flexpass_agent::api::Request::parse`: one
//! JSON line from a local program, docs/agent-api.md; the in-process ops `tcp_taken`,
//! `tcp_refused`, `tcp_closed`, `tcp_listen` with `inproc`, `settings` and `tcp_record`
//! included) never panics, and:
//! * the answer is the same with or without the line's `\n`;
//! * an accepted request is the op its `"op"` names, each of its fields the line's value
//!   (addresses compared as addresses) or, absent or null, the documented default; written
//!   out (`Request::to_line`) it is one line within `MAX_REQUEST_LINE` that parses back to
//!   the same request;
//! * a refused line's error names what is wrong: the op and a field once `"op"` is known,
//!   else that it is not JSON or which op is unknown.
//!
//! Each input is read twice: as the line itself, and as a request object built from its
//! bytes (`structured`: every op with any fields, values of every JSON type), since byte
//! mutations of a JSON line rarely keep it JSON.
#![no_main]

use flexpass_agent::api::{Request, MAX_REQUEST_LINE, OPS};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use std::net::{IpAddr, SocketAddr};

/// What `Request::parse` takes for an absent (or null) field of an op.
fn default(op: &str, key: &str) -> Value {
    match (op, key) {
        (_, "transport") => json!("flexpass"),
        ("connect", "size") => json!(0),
        ("tcp_connect", "src") => json!("0.0.0.0:0"),
        ("tcp_listen", "addr") => json!("0.0.0.0"),
        ("tcp_listen", "inproc") => json!(false),
        ("tcp_taken", "reply_flow_id") => Value::Null,
        ("tcp_record", "bytes_sent" | "bytes_received" | "duration_us") => json!(0),
        _ => panic!("{op}: \"{key}\" was absent, it has no default, yet the request parsed"),
    }
}

/// `got` (the request written out) carries the line's value `want`.
fn same_value(key: &str, want: &Value, got: &Value) {
    match (want, got) {
        (Value::String(w), Value::String(g)) => {
            if let Ok(g) = g.parse::<SocketAddr>() {
                assert_eq!(w.parse::<SocketAddr>().ok(), Some(g), "\"{key}\"");
            } else if let Ok(g) = g.parse::<IpAddr>() {
                assert_eq!(w.parse::<IpAddr>().ok(), Some(g), "\"{key}\"");
            } else {
                assert_eq!(w, g, "\"{key}\"");
            }
        }
        (Value::Number(w), Value::Number(g)) => {
            assert!(
                w.as_u64().is_some() && w.as_u64() == g.as_u64(),
                "\"{key}\": {w} vs {g}"
            )
        }
        _ => assert_eq!(want, got, "\"{key}\""),
    }
}

fn check_accepted(line: &Map<String, Value>, r: &Request) {
    assert_eq!(line.get("op"), Some(&json!(r.op())));
    let out = r.to_line();
    assert!(out.len() <= MAX_REQUEST_LINE + 1, "{out}");
    assert!(
        out.ends_with('\n') && !out[..out.len() - 1].contains('\n'),
        "{out:?}"
    );
    assert_eq!(Request::parse(out.as_bytes()).as_ref(), Ok(r), "{out}");
    let Ok(Value::Object(written)) = serde_json::from_str::<Value>(&out) else {
        panic!("{out} is not a JSON object");
    };
    for (key, got) in &written {
        match line.get(key).filter(|v| !v.is_null()) {
            Some(want) => same_value(key, want, got),
            None => assert_eq!(got, &default(r.op(), key), "\"{key}\" absent"),
        }
    }
}

fn check_refused(data: &[u8], e: &str) {
    let line: Option<Value> = serde_json::from_slice(data).ok();
    let op = match &line {
        Some(Value::Object(o)) => o
            .get("op")
            .and_then(Value::as_str)
            .and_then(|s| OPS.into_iter().find(|op| *op == s)),
        _ => None,
    };
    match (&line, op) {
        (None, _) => assert!(e.starts_with("request is not JSON: "), "{e}"),
        (Some(_), None) => assert!(e.starts_with("unknown op"), "{e}"),
        (Some(_), Some(op)) => {
            assert!(e.starts_with(&format!("{op} needs \"")), "{e}")
        }
    }
}

/// Values a field may meet: every JSON type, the integer edges of the fields' ranges,
/// addresses of every form and the transports' names.
fn value(kind: u8, next: &mut impl FnMut() -> u8) -> Value {
    const INTS: [u64; 8] = [
        0,
        1,
        65_535,
        65_536,
        4_294_967_295,
        4_294_967_296,
        u64::MAX,
        17,
    ];
    const TEXT: [&str; 15] = [
        "10.0.0.2:7890",
        "[::1]:9",
        "[fe80::1%2]:9",
        "10.0.0.2:0",
        "10.0.0.2",
        "::ffff:10.0.0.2",
        "0.0.0.0",
        "::",
        "flexpass",
        "pfabric",
        "FlexPass",
        "",
        "client",
        "server",
        "closed",
    ];
    match kind % 12 {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(INTS[usize::from(next()) % INTS.len()]),
        4 => json!(u64::from_le_bytes(std::array::from_fn(|_| next()))),
        5 => json!(-i64::from(next())),
        6 => json!(f64::from(next()) / 2.0),
        7 | 8 => json!(TEXT[usize::from(next()) % TEXT.len()]),
        9 => {
            let n = usize::from(next() % 24);
            json!(String::from_utf8_lossy(
                &(0..n).map(|_| next()).collect::<Vec<u8>>()
            ))
        }
        10 => json!([1, "x"]),
        _ => json!({}),
    }
}

/// A second reading of the input: a request object built from its bytes (the op, then
/// fields with values of every kind, each field name taken by any op), because byte
/// mutations of a JSON line rarely keep it JSON or change a value's type.
fn structured(data: &[u8]) -> Vec<u8> {
    const FIELDS: [&str; 19] = [
        "peer",
        "transport",
        "size",
        "dst",
        "src",
        "port",
        "addr",
        "inproc",
        "flow_id",
        "reply_flow_id",
        "side",
        "remote",
        "local",
        "bytes_sent",
        "bytes_received",
        "duration_us",
        "outcome",
        "op",
        "extra",
    ];
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next().unwrap_or(0);
    let mut obj = Map::new();
    let op = next();
    let op = match OPS.get(usize::from(op % 16)) {
        Some(op) => json!(op),
        None => value(op, &mut next),
    };
    obj.insert("op".into(), op);
    for _ in 0..usize::from(next() % 8) {
        let field = FIELDS[usize::from(next()) % FIELDS.len()];
        let v = value(next(), &mut next);
        obj.insert(field.into(), v);
    }
    serde_json::to_vec(&Value::Object(obj)).expect("serializable")
}

fn check(data: &[u8]) {
    let got = Request::parse(data);
    let mut with_newline = data.to_vec();
    with_newline.push(b'\n');
    assert_eq!(Request::parse(&with_newline).ok(), got.clone().ok());
    match got {
        Ok(r) => {
            let Ok(Value::Object(line)) = serde_json::from_slice::<Value>(data) else {
                panic!("accepted a line that is not a JSON object: {r:?}");
            };
            check_accepted(&line, &r);
        }
        Err(e) => check_refused(data, &e.0),
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    check(&structured(data));
});
