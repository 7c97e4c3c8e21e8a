//! Seeds of the text-parser targets (`api`, `edge_text`): real inputs, so libFuzzer starts
//! from every request and every answer layout instead of finding JSON keys and `tc`'s
//! words by chance.
//!
//! * `api`: every request line docs/agent-api.md shows (`→ {…}`; the agent's api tests
//!   parse the same lines), the in-process hand-over ops of issue 28 included, and the
//!   lines libflexpass.so writes (crates/flexpass-preload/src/request.rs and the in-process
//!   listener's answers in crates/flexpass-agent/tests/inproc.rs), at their longest.
//! * `edge_text`: `tc -s class show` of the qdisc edge's htb classes (iproute2's text, as in
//!   crates/flexpass-agent/src/edge.rs's tests) and the DPDK SWX pipeline CLI's banner and
//!   `regrd` answers (examples/pipeline's conn.c and cli.c: `0x%" PRIx64 "\n"`, a prompt after
//!   each read's answers; a refused command), as crates/flexpass-agent/src/edge/swx.rs reads
//!   them.

/// The request lines of `doc` (docs/agent-api.md): `→ {…}` lines, the arrow left out.
pub fn doc_requests(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("→ "))
        .filter(|l| l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// (file name, line) of the `api` target, given docs/agent-api.md's text.
pub fn api_seeds(doc: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = doc_requests(doc)
        .into_iter()
        .enumerate()
        .map(|(i, l)| (format!("doc-{i:02}"), l.into_bytes()))
        .collect();
    let library = [
        // request.rs: tcp_connect / tcp_listen / tcp_peer at their longest.
        "{\"op\":\"tcp_connect\",\"dst\":\"255.255.255.255:65535\",\"src\":\"255.255.255.254:65534\",\"transport\":\"expresspass\"}\n",
        "{\"op\":\"tcp_listen\",\"port\":65535,\"addr\":\"1111:2222:3333:4444:5555:6666:7777:8888\"}\n",
        "{\"op\":\"tcp_listen\",\"port\":1,\"addr\":\"::ffff:10.0.0.2\"}\n",
        "{\"op\":\"tcp_peer\",\"port\":0}\n",
        // tests/inproc.rs: a registration and its answers.
        "{\"op\":\"tcp_listen\",\"port\":5201,\"inproc\":true}\n",
        "{\"op\":\"tcp_taken\",\"peer\":\"127.0.0.1:40000\",\"flow_id\":4294967295}\n",
        "{\"op\":\"tcp_refused\",\"peer\":\"[::1]:40000\",\"flow_id\":0}\n",
        "{\"op\":\"tcp_closed\",\"peer\":\"127.0.0.1:9\",\"flow_id\":1}\n",
        // Fields null (absent) and unknown, as the doc allows.
        "{\"op\":\"tcp_taken\",\"peer\":\"10.0.0.1:7890\",\"flow_id\":17,\"reply_flow_id\":null,\"extra\":[1,{}]}\n",
        "{\"op\":\"connect\",\"peer\":\"[fe80::1%2]:7890\",\"transport\":\"pfabric\",\"size\":18446744073709551615}\n",
    ];
    out.extend(
        library
            .iter()
            .enumerate()
            .map(|(i, l)| (format!("library-{i:02}"), l.as_bytes().to_vec())),
    );
    out
}

/// iproute2's text for the htb classes nic/flexpass_nic.py builds (C = 100 Mbit/s, share 1).
const HTB_CREDIT_CLASS: &str = "class htb 1:10 parent 1:1 leaf 10: prio 0 rate 2589Kbit ceil 2589Kbit burst 183b cburst 183b \n Sent 64260 bytes 1071 pkt (dropped 37, overlimits 412 requeues 0) \n backlog 0b 0p requeues 0\n lended: 1071 borrowed: 0 giants: 0\n tokens: 8875 ctokens: 8875\n\n";
const HTB_ROOT: &str = "class htb 1:1 root rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b \n Sent 9 bytes 5 pkt (dropped 1, overlimits 0 requeues 0) \n\n";
const HTB_DATA: &str = "class htb 1:20 parent 1:1 leaf 20: prio 1 rate 47411Kbit ceil 100Mbit burst 1588b cburst 1600b \n Sent 7 bytes 3 pkt (dropped 2, overlimits 0 requeues 0) \n";

/// The SWX pipeline CLI's prompt.
const PROMPT: &str = "pipeline> ";

/// (file name, text) of the `edge_text` target.
pub fn edge_text_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // `regrd` answers of a batch, a prompt after each read's share (two reads here).
    let answers = |values: &[u64], split: usize| {
        let mut s = String::new();
        for (i, v) in values.iter().enumerate() {
            if i == split {
                s.push_str(PROMPT);
            }
            s.push_str(&format!("0x{v:x}\n"));
        }
        s.push_str(PROMPT);
        s
    };
    // nic_events after 16 credits of three flows and a forged header
    // (nic/tests/test_dpdk_swx.py), and class_packets with credits, data and control.
    let events = [0, 0, 0, 0, 0, 20, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut classes = [0u64; 32];
    classes[4] = 16;
    classes[8] = 3;
    classes[14] = 2;
    classes[16] = 1;
    vec![
        ("htb-credit-class", HTB_CREDIT_CLASS.into()),
        (
            "htb-three-classes",
            format!("{HTB_ROOT}{HTB_CREDIT_CLASS}{HTB_DATA}").into(),
        ),
        ("swx-banner", format!("\nWelcome!\n\n{PROMPT}").into()),
        ("swx-nic-events", answers(&events, 9).into()),
        ("swx-class-packets", answers(&classes, 32).into()),
        (
            "swx-wide-values",
            answers(&[u64::MAX, 1 << 32, 0xffff_ffff, 0x1234_5678_9abc], 2).into(),
        ),
        (
            "swx-refused",
            format!("0x0\n0x3\nCommand \"regrd\" failed.\n{PROMPT}").into(),
        ),
    ]
}
