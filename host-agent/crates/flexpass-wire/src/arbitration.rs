//! PASE's arbitration messages (Munir et al., SIGCOMM'14 §3.1; docs/protocol.md §6.11–6.12):
//! a PASE sender tells its arbitrator the flow's criterion (remaining size) and demand, the
//! arbitrator answers with the flow's priority queue and reference rate (Algorithm 1,
//! `flexpass_core::pase`). Body layouts only; the common header is `crate::packet`'s.

use crate::error::{DecodeError, EncodeError};
use crate::read::{array_at, exact_len, u32_at, u64_at, u8_at};
use crate::{ARBITRATION_REQUEST_LEN, ARBITRATION_RESPONSE_LEN, PRIORITY_LEVELS};

/// ARBITRATION_REQUEST (0xC): sender → arbitrator, once per arbitration interval while the
/// flow has data; `remaining` 0 releases the flow at the arbitrator (no answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArbitrationRequest {
    /// Flow identifier (the arbitrator names a flow by the request's source and this id).
    pub flow_id: u32,
    /// Request number within the flow, from 0, +1 per request (the answer echoes it).
    pub arb_seq: u32,
    /// The criterion: bytes the flow still has to deliver (0: the flow ended).
    pub remaining: u64,
    /// The rate the flow can use, bit/s (the host's line rate unless less); never 0.
    pub demand_bps: u64,
}

/// ARBITRATION_RESPONSE (0xD): arbitrator → sender, the answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArbitrationResponse {
    /// Flow identifier (echo).
    pub flow_id: u32,
    /// `arb_seq` of the request answered.
    pub arb_seq: u32,
    /// Priority queue, 0 (highest) ..= 7: the data's DSCP priority P0..P7.
    pub queue: u8,
    /// Reference rate, bit/s; never 0.
    pub reference_rate_bps: u64,
}

pub(crate) fn decode_request(buf: &[u8], flow_id: u32) -> Result<ArbitrationRequest, DecodeError> {
    exact_len(buf.len(), ARBITRATION_REQUEST_LEN)?;
    let demand_bps = u64_at(buf, 20)?;
    if demand_bps == 0 {
        return Err(DecodeError::BadRate);
    }
    Ok(ArbitrationRequest {
        flow_id,
        arb_seq: u32_at(buf, 8)?,
        remaining: u64_at(buf, 12)?,
        demand_bps,
    })
}

pub(crate) fn decode_response(
    buf: &[u8],
    flow_id: u32,
) -> Result<ArbitrationResponse, DecodeError> {
    exact_len(buf.len(), ARBITRATION_RESPONSE_LEN)?;
    let queue = u8_at(buf, 12)?;
    if usize::from(queue) >= PRIORITY_LEVELS {
        return Err(DecodeError::BadQueue(queue));
    }
    if array_at::<3>(buf, 13)? != [0; 3] {
        return Err(DecodeError::NonZeroReserved);
    }
    let reference_rate_bps = u64_at(buf, 16)?;
    if reference_rate_bps == 0 {
        return Err(DecodeError::BadRate);
    }
    Ok(ArbitrationResponse {
        flow_id,
        arb_seq: u32_at(buf, 8)?,
        queue,
        reference_rate_bps,
    })
}

pub(crate) fn encode_request(r: &ArbitrationRequest, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.arb_seq.to_be_bytes());
    out.extend_from_slice(&r.remaining.to_be_bytes());
    out.extend_from_slice(&r.demand_bps.to_be_bytes());
}

pub(crate) fn encode_response(r: &ArbitrationResponse, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.arb_seq.to_be_bytes());
    out.push(r.queue);
    out.extend_from_slice(&[0, 0, 0]); // reserved
    out.extend_from_slice(&r.reference_rate_bps.to_be_bytes());
}

pub(crate) fn validate_request(r: &ArbitrationRequest) -> Result<(), EncodeError> {
    if r.demand_bps == 0 {
        return Err(EncodeError::BadRate);
    }
    Ok(())
}

pub(crate) fn validate_response(r: &ArbitrationResponse) -> Result<(), EncodeError> {
    if usize::from(r.queue) >= PRIORITY_LEVELS {
        return Err(EncodeError::BadQueue(r.queue));
    }
    if r.reference_rate_bps == 0 {
        return Err(EncodeError::BadRate);
    }
    Ok(())
}
