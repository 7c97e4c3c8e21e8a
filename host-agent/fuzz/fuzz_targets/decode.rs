//! Fuzz target: the decoder must never panic, and every accepted message
//! must survive encode → decode unchanged and be canonically encoded
//! (except the content of CREDIT padding bytes, which is ignored).
#![no_main]

use flexpass_wire::Packet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let first = Packet::decode(data);
    // The zero-copy decoder must agree with the copying one.
    let shared = Packet::decode_bytes(&bytes::Bytes::copy_from_slice(data));
    assert_eq!(first, shared);

    let Ok(p) = first else { return };
    assert_eq!(p.validate(), Ok(()));
    let re = p.encode_to_vec();
    assert_eq!(re.len(), data.len());
    if matches!(p, Packet::Credit(_)) {
        assert_eq!(re[..12], data[..12]);
        assert!(re[12..].iter().all(|&b| b == 0));
    } else {
        assert_eq!(re.as_slice(), data);
    }
    let again = Packet::decode(&re).expect("re-encoded packet must decode");
    assert_eq!(again, p);
});
