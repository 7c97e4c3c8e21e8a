//! Tests of crate::api (the request parser, the replies, docs/agent-api.md's examples).
use super::*;

fn parse(s: &str) -> Result<Request, String> {
    Request::parse(s.as_bytes()).map_err(|e| e.0)
}

/// The requests of docs/agent-api.md, with their defaults.
#[test]
fn the_documented_requests_parse() {
    let flexpass = TransportKind::FlexPass;
    assert_eq!(
        parse(
            r#"{"op": "connect", "peer": "10.0.0.2:7890", "transport": "flexpass", "size": 123456}"#
        ),
        Ok(Request::Connect {
            peer: "10.0.0.2:7890".parse().unwrap(),
            transport: flexpass,
            size: 123456
        })
    );
    assert_eq!(
        parse(r#"{"op":"connect","peer":"10.0.0.2:7890","transport":"ppt"}"#),
        Ok(Request::Connect {
            peer: "10.0.0.2:7890".parse().unwrap(),
            transport: TransportKind::Ppt,
            size: 0
        })
    );
    assert_eq!(parse(r#"{"op": "accept"}"#), Ok(Request::Accept));
    assert_eq!(
        parse(
            r#"{"op": "tcp_connect", "dst": "10.0.0.2:5201", "src": "10.0.0.1:43210", "transport": "flexpass"}"#
        ),
        Ok(Request::TcpConnect {
            dst: "10.0.0.2:5201".parse().unwrap(),
            src: "10.0.0.1:43210".parse().unwrap(),
            transport: flexpass
        })
    );
    assert_eq!(
        parse(r#"{"op":"tcp_connect","dst":"127.0.0.1:9","src":null}"#),
        Ok(Request::TcpConnect {
            dst: "127.0.0.1:9".parse().unwrap(),
            src: "0.0.0.0:0".parse().unwrap(),
            transport: flexpass
        })
    );
    assert_eq!(
        parse(r#"{"op": "tcp_listen", "port": 5201, "addr": "0.0.0.0"}"#),
        Ok(Request::TcpListen {
            port: 5201,
            addr: "0.0.0.0".parse().unwrap(),
            inproc: false
        })
    );
    assert_eq!(
        parse(r#"{"op":"tcp_listen","port":80,"addr":"::","extra":[1]}"#),
        Ok(Request::TcpListen {
            port: 80,
            addr: "::".parse().unwrap(),
            inproc: false
        })
    );
    assert_eq!(
        parse(r#"{"op": "tcp_peer", "port": 40312}"#),
        Ok(Request::TcpPeer { port: 40312 })
    );
    assert_eq!(parse("{\"op\": \"status\"}\n"), Ok(Request::Status));
}

/// docs/agent-api.md and this module agree: every request shown there parses, and its
/// table lists every op.
#[test]
fn the_requests_in_docs_agent_api_parse() {
    let doc = agent_api_md();
    let mut ops = vec![];
    for l in doc.lines() {
        if let Some(req) = l.strip_prefix("→ {") {
            let r = Request::parse(format!("{{{req}").as_bytes());
            let op = r.unwrap_or_else(|e| panic!("{l}: {e}")).op();
            // tcp_listen is shown again with `inproc`.
            if !ops.contains(&op) {
                ops.push(op);
            }
        }
    }
    assert_eq!(ops, OPS, "an example per op, in this order");
    for op in OPS {
        assert!(
            doc.contains(&format!("| `{op}` |")),
            "{op} not in the table"
        );
    }
}

fn agent_api_md() -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../docs/agent-api.md");
    std::fs::read_to_string(p).unwrap()
}

/// The JSON in docs/agent-api.md from `marker` (a reply's `← ` left out) to the end of
/// its fenced block: a placeholder `…text…` (an object documented elsewhere) is dropped,
/// leaving `{ }`.
fn doc_json(doc: &str, marker: &str) -> Value {
    let at = doc
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in the doc"));
    let block = doc[at..].trim_start_matches("← ");
    let block = &block[..block.find("```").expect("closing fence")];
    let mut text = String::new();
    let mut in_placeholder = false;
    for c in block.chars() {
        if c == '…' {
            in_placeholder = !in_placeholder;
        } else if !in_placeholder {
            text.push(c);
        }
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{marker}…: {e}\n{text}"))
}

/// `doc` and `got` have the same keys at every level and the same kinds of values; an
/// empty object in `doc` is a placeholder, each element of an array is compared with
/// the doc's first one.
fn same_shape(path: &str, doc: &Value, got: &Value, diffs: &mut Vec<String>) {
    match (doc, got) {
        (Value::Object(d), Value::Object(g)) => {
            if d.is_empty() {
                return;
            }
            let mut dk: Vec<_> = d.keys().collect();
            let mut gk: Vec<_> = g.keys().collect();
            dk.sort();
            gk.sort();
            if dk != gk {
                diffs.push(format!("{path}: doc has keys {dk:?}, the type {gk:?}"));
            }
            for (k, dv) in d {
                if let Some(gv) = g.get(k) {
                    same_shape(&format!("{path}.{k}"), dv, gv, diffs);
                }
            }
        }
        (Value::Array(d), Value::Array(g)) => {
            assert!(!g.is_empty(), "{path}: fill the test's arrays");
            for gv in g {
                same_shape(&format!("{path}[]"), &d[0], gv, diffs);
            }
        }
        (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Null, Value::Null) => {}
        _ => diffs.push(format!("{path}: doc shows {doc}, the type writes {got}")),
    }
}

/// The keys of a set written `{"a", "b": x | y, …}` in the doc's prose.
fn key_set(set: &str) -> Vec<String> {
    let inner = set.trim().trim_start_matches('{').trim_end_matches('}');
    let mut keys: Vec<String> = inner
        .split(',')
        .map(|part| part.split('"').nth(1).expect("a quoted key").to_string())
        .collect();
    keys.sort();
    keys
}

fn sample_record(outcome: &str) -> ConnRecord {
    ConnRecord {
        side: Side::Server,
        conn_id: 7,
        remote: "10.0.0.1:43210".parse().unwrap(),
        local: "10.0.0.2:5201".parse().unwrap(),
        transport: TransportKind::PFabric,
        bytes_sent: 512,
        bytes_received: 1 << 20,
        duration_s: 0.25,
        outcome: outcome.into(),
        in_process: false,
        sender: Some(SenderStats::default()),
    }
}

/// A status with every array filled and every optional value present but `xdp` (null
/// on UDP, as the doc's example shows).
fn sample_status() -> Status {
    Status {
        flows: FlowCounts {
            senders: 1,
            receivers: 2,
        },
        tcp: TcpStatus {
            open: 1,
            listening: vec![5201],
            inproc_listening: vec![6379],
            no_agent_peers: vec!["10.0.0.3".parse().unwrap()],
            conns: vec![sample_record("open")],
            closed: vec![sample_record("aborted: reset by the peer")],
            ..TcpStatus::default()
        },
        endpoint: EndpointStats::default(),
        datapath: DatapathStatus {
            kind: "udp",
            xdp: None,
        },
        credit_limit: CreditLimitStatus {
            policed_by: "edge",
            nic_edge: NicEdge::Ebpf,
            agent_bytes_per_s: None,
            edge: Some(EdgeCounters {
                maps: Some("/sys/fs/bpf/flexpass-edge/eth0/tc/globals".into()),
                dev: None,
                swx_cli: None,
                credit_rate_bytes_per_s: Some(23_119),
                credit_burst_bytes: Some(120),
                credits_passed: 38_511,
                credits_dropped: 4_107,
                pna: None,
            }),
            edge_error: None,
        },
        api: ApiStatus::default(),
        memory: Memory {
            rss_kb: Some(10664),
            rss_peak_kb: Some(10828),
            virtual_kb: Some(17148),
        },
        tables: Tables::default(),
    }
}

/// docs/agent-api.md and `Status` agree: the status example, the connection record, the
/// table's reply keys and the AF_XDP set-up keys are exactly those the types write.
#[test]
fn the_status_in_docs_agent_api_is_the_type() {
    let doc = agent_api_md();
    let line = String::from_utf8(Reply::Status(Box::new(sample_status())).to_line()).unwrap();
    let got: Value = serde_json::from_str(&line).unwrap();
    let mut diffs = vec![];
    let doc_status = doc_json(&doc, "← {\"ok\": true, \"flows\"");
    same_shape("status", &doc_status, &got, &mut diffs);
    let record = serde_json::to_value(sample_record("closed")).unwrap();
    let doc_record = doc_json(&doc, "{\"event\": \"tcp_conn\"");
    same_shape("record", &doc_record, &record, &mut diffs);
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
    // The record's typed values are those the daemon wrote as JSON before.
    assert_eq!(record["event"], "tcp_conn");
    assert_eq!(record["side"], "server");
    assert_eq!(record["transport"], "pfabric");
    assert_eq!(record["remote"], "10.0.0.1:43210");
    assert!(record["sender"].is_object());
    let mut no_sender = sample_record("open");
    no_sender.sender = None;
    let v = serde_json::to_value(no_sender).unwrap();
    assert!(v.get("sender").is_none(), "absent, not null: {v}");

    let row = doc
        .lines()
        .find(|l| l.starts_with("| `status` |"))
        .expect("status in the table");
    let cell = row.trim_end_matches('|').rsplit('|').next().unwrap();
    let mut top: Vec<String> = got.as_object().unwrap().keys().cloned().collect();
    top.sort();
    assert_eq!(key_set(cell.trim().trim_matches('`')), top, "{row}");

    let prose = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = prose
        .find("`xdp`: `{")
        .expect("the xdp set-up in the prose")
        + 8;
    let set = &prose[at..at + prose[at..].find('`').unwrap()];
    let xdp = XdpInfo {
        iface: "eth0".into(),
        queues: vec![0],
        attach: "native",
        zero_copy: false,
        multi_buffer: true,
    };
    let xdp = serde_json::to_value(xdp).unwrap();
    let mut keys: Vec<String> = xdp.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(key_set(set), keys, "{set}");
}

/// The `tcp_hello` event in docs/agent-api.md has exactly `TcpHello`'s keys.
#[test]
fn the_tcp_hello_in_docs_agent_api_is_the_type() {
    let doc = agent_api_md();
    let documented = doc_json(&doc, "← {\"event\": \"tcp_hello\"");
    let ev = TcpHello {
        peer: "10.0.0.1:7890".parse().unwrap(),
        flow_id: 17,
        transport: TransportKind::FlexPass,
        conn_id: 17,
        src_port: 43210,
        dst_port: 5201,
        idle: false,
        hello: "00".into(),
    };
    let mut diffs = vec![];
    same_shape(
        "tcp_hello",
        &documented,
        &serde_json::to_value(&ev).unwrap(),
        &mut diffs,
    );
    assert!(diffs.is_empty(), "{diffs:#?}");
}

#[test]
fn every_request_survives_its_own_line() {
    let all = [
        Request::Connect {
            peer: "[::1]:7890".parse().unwrap(),
            transport: TransportKind::FlashPass,
            size: u64::MAX,
        },
        Request::Accept,
        Request::TcpConnect {
            dst: "10.0.0.2:5201".parse().unwrap(),
            src: "10.0.0.1:43210".parse().unwrap(),
            transport: TransportKind::Dctcp,
        },
        Request::TcpListen {
            port: 65535,
            addr: "10.0.0.2".parse().unwrap(),
            inproc: true,
        },
        Request::TcpPeer { port: 0 },
        Request::Status,
        Request::TcpTaken {
            peer: "10.0.0.1:7890".parse().unwrap(),
            flow_id: u32::MAX,
            reply_flow_id: Some(9),
        },
        Request::TcpRefused {
            peer: "[::1]:7890".parse().unwrap(),
            flow_id: 0,
        },
        Request::TcpClosed {
            peer: "10.0.0.1:1".parse().unwrap(),
            flow_id: 17,
        },
        Request::Settings,
        Request::TcpRecord(InprocRecord {
            side: Side::Client,
            remote: "10.0.0.2:5201".parse().unwrap(),
            local: "[::1]:40000".parse().unwrap(),
            transport: TransportKind::Pase,
            bytes_sent: u64::MAX,
            bytes_received: 0,
            duration_us: 1,
            outcome: "x".repeat(MAX_OUTCOME),
        }),
    ];
    assert_eq!(all.len(), OPS.len());
    for (r, op) in all.iter().zip(OPS) {
        assert_eq!(r.op(), op);
        assert_eq!(Request::parse(r.to_line().as_bytes()).as_ref(), Ok(r));
    }
}

/// Each refusal names the op and the field (and what came instead).
#[test]
fn bad_requests_name_the_op_and_the_field() {
    let cases = [
        ("hello", "request is not JSON"),
        ("[1,2,3]", "unknown op (a request is a JSON object, got [1,2,3])"),
        ("{}", "unknown op (no \"op\")"),
        (r#"{"op":5}"#, "unknown op 5: \"op\" is one of connect, accept,"),
        (r#"{"op":"format_disk"}"#, "unknown op \"format_disk\""),
        (r#"{"op":"connect"}"#, "connect needs \"peer\": \"IP:PORT\""),
        (
            r#"{"op":"connect","peer":7890}"#,
            "connect needs \"peer\": \"IP:PORT\", got 7890",
        ),
        (
            r#"{"op":"connect","peer":"127.0.0.1:1","transport":"tcp"}"#,
            "connect needs \"transport\": flexpass | expresspass | dctcp | ppt | flashpass | pfabric | pase, got \"tcp\"",
        ),
        (
            r#"{"op":"connect","peer":"127.0.0.1:1","transport":1}"#,
            "connect needs \"transport\"",
        ),
        (
            r#"{"op":"connect","peer":"127.0.0.1:1","size":-1}"#,
            "connect needs \"size\": an integer 0..18446744073709551615, got -1",
        ),
        (
            r#"{"op":"tcp_connect","dst":"[::1]:80"}"#,
            "tcp_connect needs \"dst\": \"IPv4:PORT\", got \"[::1]:80\"",
        ),
        (
            r#"{"op":"tcp_connect","dst":"127.0.0.1:80","src":"x"}"#,
            "tcp_connect needs \"src\": \"IP:PORT\", got \"x\"",
        ),
        (
            r#"{"op":"tcp_listen","port":70000}"#,
            "tcp_listen needs \"port\": an integer 1..65535, got 70000",
        ),
        (
            r#"{"op":"tcp_listen","port":0}"#,
            "tcp_listen needs \"port\": an integer 1..65535, got 0",
        ),
        (
            r#"{"op":"tcp_listen","port":"80"}"#,
            "tcp_listen needs \"port\": an integer 1..65535, got \"80\"",
        ),
        (
            r#"{"op":"tcp_listen","port":80,"addr":"localhost"}"#,
            "tcp_listen needs \"addr\": an IP address, got \"localhost\"",
        ),
        (
            r#"{"op":"tcp_peer","port":-1}"#,
            "tcp_peer needs \"port\": an integer 0..65535, got -1",
        ),
        (r#"{"op":"tcp_peer"}"#, "tcp_peer needs \"port\": an integer 0..65535"),
    ];
    for (line, want) in cases {
        let e = parse(line).expect_err(line);
        assert!(
            e.starts_with(want),
            "{line}: {e:?} does not start with {want:?}"
        );
    }
}

/// Reply lines as the daemon wrote them before the types existed (sorted keys).
#[test]
fn replies_keep_their_wire_format() {
    let line = |r: Reply| String::from_utf8(r.to_line()).unwrap();
    assert_eq!(
        line(Reply::error("not a FlexPass connection")),
        "{\"error\":\"not a FlexPass connection\",\"ok\":false}\n"
    );
    assert_eq!(
        line(Reply::Connected(Connected { flow_id: 7 })),
        "{\"flow_id\":7,\"ok\":true}\n"
    );
    assert_eq!(
        line(Reply::FlowSent(FlowSent {
            flow_id: 7,
            bytes: 100,
            fct_us: 12.5,
            retransmissions: 1,
            timeouts: 0,
            credits_received: 3,
            credits_wasted: 2
        })),
        "{\"bytes\":100,\"credits_received\":3,\"credits_wasted\":2,\"event\":\"flow_sent\",\
         \"fct_us\":12.5,\"flow_id\":7,\"ok\":true,\"retransmissions\":1,\"timeouts\":0}\n"
    );
    assert_eq!(
        line(Reply::Accepted(Accepted {
            flow_id: 7,
            peer: "10.0.0.1:7890".parse().unwrap(),
            transport: Some(TransportKind::ExpressPass)
        })),
        "{\"flow_id\":7,\"ok\":true,\"peer\":\"10.0.0.1:7890\",\"transport\":\"expresspass\"}\n"
    );
    assert_eq!(
        line(Reply::TcpVerdict(TcpVerdict::FlexPass {
            conn_id: 9,
            transport: TransportKind::FlexPass
        })),
        "{\"conn_id\":9,\"mode\":\"flexpass\",\"ok\":true,\"transport\":\"flexpass\"}\n"
    );
    assert_eq!(
        line(Reply::TcpVerdict(TcpVerdict::Direct {
            reason: "peer does not speak FlexPass (cached)".into(),
            peer_has_no_agent: true
        })),
        "{\"mode\":\"direct\",\"ok\":true,\"peer_has_no_agent\":true,\
         \"reason\":\"peer does not speak FlexPass (cached)\"}\n"
    );
    assert_eq!(
        line(Reply::Listening(Listening { port: 5201 })),
        "{\"ok\":true,\"port\":5201}\n"
    );
    assert_eq!(
        line(Reply::PeerNames(PeerNames {
            peer: "10.0.0.1:43210".parse().unwrap(),
            local: "10.0.0.2:5201".parse().unwrap()
        })),
        "{\"local\":\"10.0.0.2:5201\",\"ok\":true,\"peer\":\"10.0.0.1:43210\"}\n"
    );
    let settings = Settings {
        link_gbps: 10.0,
        rtt_us: 100.0,
        w_q: 0.5,
        credit_batch: 1,
        mtu: 1500,
        t_wait_us: 2000.0,
        flashpass_unscheduled: true,
    };
    assert_eq!(
        line(Reply::Settings(settings.clone())),
        "{\"credit_batch\":1,\"flashpass_unscheduled\":true,\"link_gbps\":10.0,\"mtu\":1500,\
         \"ok\":true,\"rtt_us\":100.0,\"t_wait_us\":2000.0,\"w_q\":0.5}\n"
    );
    assert_eq!(line(Reply::Done), "{\"ok\":true}\n");
    // As docs/agent-api.md shows it.
    let doc: Settings =
        serde_json::from_value(doc_json(&agent_api_md(), "← {\"ok\": true, \"link_gbps\""))
            .expect("the doc's settings reply");
    assert_eq!(doc, settings);
    // The typed replies read back (clients in Rust).
    let v: TcpVerdict = serde_json::from_str(
        r#"{"mode":"direct","ok":true,"peer_has_no_agent":false,"reason":"x"}"#,
    )
    .unwrap();
    assert_eq!(
        v,
        TcpVerdict::Direct {
            reason: "x".into(),
            peer_has_no_agent: false
        }
    );
}
