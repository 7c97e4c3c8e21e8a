// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// FlexPass NIC edge as a tc egress program (clsact, cls_bpf direct-action): the eBPF twin of
// p4src/pna/flexpass_nic.p4 for hosts whose NIC is a Linux netdev (docs/smartnic.md).
//
//   parse (Ethernet -> IPv4 -> UDP -> FlexPass header -> CREDIT body, or TCP)
//   -> classify by DSCP through `dscp_plan` (the switch's classifier: kind, colour, queue;
//      skb->priority = the htb class of nic/flexpass_nic.py, which replaces its u32 filters)
//   -> police credits with a token bucket at share·C·84/(84+F) (rate and burst: the PNA
//      meter's, control-plane/flexpass_cp/config/derive.py) -> count per (kind, colour).
//
// Everything the program decides comes from maps the loader (nic/flexpass_ebpf.py) writes;
// nothing about a deployment is compiled in. Until `edge_config` is written the program
// passes every packet untouched. Maps are pinned by name (tc: <bpffs>/tc/globals/NAME).
//
// Built with `clang -O2 -g -target bpf` (BTF for the spin lock); only the kernel UAPI
// headers, like host-agent/crates/flexpass-agent/bpf/flexpass_xsk.c.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#define LIBBPF_PIN_BY_NAME 1

// Kernel helper ABI (include/uapi/linux/bpf.h, enum bpf_func_id): stable numbers.
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)BPF_FUNC_map_update_elem;
static long (*bpf_skb_load_bytes)(const void *skb, __u32 off, void *to, __u32 len) = (void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *)BPF_FUNC_spin_lock;
static long (*bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *)BPF_FUNC_spin_unlock;

// ---- Shared with the loader (nic/flexpass_ebpf.py: the same layouts and numbers) ----------

// Kinds and colours: p4src/shared/define.p4 (KIND_*, COLOR_*).
#define KIND_LEGACY 0
#define KIND_CREDIT 1
#define COLOR_GREEN 0

// `nic_events` cells: the PNA program's ids (p4src/pna/include/metadata.p4) plus the edge's.
#define EVT_PARSER_ERROR 0   // a truncated header of any kind
#define EVT_NOT_IPV4 1       // passed as legacy
#define EVT_FLEXPASS_SEEN 5  // FlexPass common header parsed
#define EVT_BAD_FLEXPASS 7   // FlexPass version, length or CREDIT body wrong
#define EVT_CREDIT_DROPPED 9 // a credit above the token bucket, dropped
#define EVT_MALFORMED_DROPPED 10 // parser error or bad FlexPass dropped (EDGE_DROP_MALFORMED)
#define NIC_EVT_COUNT 16

// Per-class counters: cell kind ++ colour (CLASS_INDEX of the PNA program).
#define CLASS_COUNTER_SIZE 32
#define CLASS_INDEX(kind, color) ((((kind) & 7) << 2) | ((color) & 3))

#define EDGE_DROP_MALFORMED 1 // drop what the PNA program drops (default: pass it untouched)

#define FLEXPASS_VERSION 1
#define FLEXPASS_TYPE_CREDIT 1
#define FLEXPASS_TYPE_EMULATION 0xa
#define NS_PER_S 1000000000ULL

struct edge_config {
	__u64 rate_bytes_per_s; // credit meter CIR in frame bytes (without FCS) per second
	__u64 burst_bytes;      // credit meter burst in the same bytes
	__u64 test_clock_ns;    // nonzero: the bucket's clock (BPF_PROG_TEST_RUN tests); 0: ktime
	__u32 min_frame_bytes;  // a credit costs at least this (60: the minimum frame w/o FCS)
	__u16 udp_port;         // FlexPass UDP port, matched as source or destination
	__u8 flags;             // EDGE_*
	__u8 configured;        // 0: pass everything untouched (before the loader writes)
	__u32 legacy_priority;  // skb->priority of packets that are not IPv4 (the legacy class)
	__u32 pad;
};

struct dscp_class {
	__u32 priority; // skb->priority: the htb class (major:minor); 0 leaves skb->priority
	__u8 kind;      // KIND_*
	__u8 color;     // COLOR_*
	__u8 qid;       // the switch's queue id (documentation for `show`; not used here)
	__u8 pad;
};

// Invariant: 0 <= tokens_nb <= burst_bytes * 1e9 (tokens in nano-bytes: no division).
struct bucket {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 tokens_nb;
	__u64 last_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edge_config);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} edge_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct dscp_class);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dscp_plan SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bucket);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} credit_bucket SEC(".maps");

// A pinned array of `entries` u64 counters (read by the loader and the agent by name).
#define COUNTER_ARRAY(name, entries)                 \
	struct {                                     \
		__uint(type, BPF_MAP_TYPE_ARRAY);    \
		__uint(max_entries, entries);        \
		__type(key, __u32);                  \
		__type(value, __u64);                \
		__uint(pinning, LIBBPF_PIN_BY_NAME); \
	} name SEC(".maps")

COUNTER_ARRAY(nic_events, NIC_EVT_COUNT);

// Packets and IPv4 bytes per (kind, colour) that left: what the PNA program counts.
COUNTER_ARRAY(class_packets, CLASS_COUNTER_SIZE);
COUNTER_ARRAY(class_bytes, CLASS_COUNTER_SIZE);

// Credits passed per flow (sender = the credit's destination, receiver = its source,
// flow_id; docs/protocol.md §2): the PNA program's flow_credits, here add-on-miss with
// LRU eviction instead of hashed slots. Key fields as on the wire (network order).
struct flow_key {
	__be32 src, dst, flow_id;
};

#define FLOW_ENTRIES 4096

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FLOW_ENTRIES);
	__type(key, struct flow_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} flow_credits SEC(".maps");

static __always_inline void count(void *map, __u32 idx, __u64 n)
{
	__u64 *cell = bpf_map_lookup_elem(map, &idx);
	if (cell)
		__sync_fetch_and_add(cell, n);
}

// Token bucket at rate_bytes_per_s with depth burst_bytes: 1 if `cost` bytes may pass.
static __always_inline int credit_conforms(const struct edge_config *cfg, __u64 cost)
{
	__u32 zero = 0;
	struct bucket *b = bpf_map_lookup_elem(&credit_bucket, &zero);
	if (!b)
		return 1;
	__u64 now = cfg->test_clock_ns ? cfg->test_clock_ns : bpf_ktime_get_ns();
	__u64 cap = cfg->burst_bytes * NS_PER_S;
	int ok = 0;
	bpf_spin_lock(&b->lock);
	__u64 elapsed = now > b->last_ns ? now - b->last_ns : 0;
	// One second refills any bucket the loader accepts; the cap keeps elapsed·rate in u64.
	if (elapsed > NS_PER_S)
		elapsed = NS_PER_S;
	__u64 tokens = b->tokens_nb + elapsed * cfg->rate_bytes_per_s;
	if (tokens > cap)
		tokens = cap;
	if (now > b->last_ns)
		b->last_ns = now;
	if (tokens >= cost * NS_PER_S) {
		tokens -= cost * NS_PER_S;
		ok = 1;
	}
	b->tokens_nb = tokens;
	bpf_spin_unlock(&b->lock);
	return ok;
}

// A packet the PNA program would drop, counted: passed with its bytes untouched (a host's
// NIC must not cut its own traffic) unless the loader asked for the PNA behaviour.
static __always_inline int malformed(const struct edge_config *cfg, __u32 evt)
{
	count(&nic_events, evt, 1);
	if (cfg->flags & EDGE_DROP_MALFORMED) {
		count(&nic_events, EVT_MALFORMED_DROPPED, 1);
		return TC_ACT_SHOT;
	}
	return TC_ACT_OK;
}

struct ipv4 {
	__u8 ver_ihl, tos;
	__be16 total_len, id, frag_off;
	__u8 ttl, protocol;
	__be16 check;
	__be32 src, dst;
};

struct fp_hdr {
	__u8 ver_type, flags;
	__be16 length;
	__be32 flow_id;
};

SEC("tc")
int flexpass_edge(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct edge_config *cfg = bpf_map_lookup_elem(&edge_config, &zero);
	if (!cfg || !cfg->configured)
		return TC_ACT_OK;

	__u32 len = skb->len;
	__be16 ethertype;
	if (len < 14 || bpf_skb_load_bytes(skb, 12, &ethertype, 2))
		return malformed(cfg, EVT_PARSER_ERROR);

	struct ipv4 ip;
	__u32 kind = KIND_LEGACY, color = COLOR_GREEN, priority = 0, ip_bytes = 0;
	if (ethertype != __builtin_bswap16(0x0800)) {
		// Not IPv4 (ARP, IPv6): passed as legacy, like the PNA program.
		count(&nic_events, EVT_NOT_IPV4, 1);
		priority = cfg->legacy_priority;
		goto out;
	}
	if (len < 14 + sizeof(ip) || bpf_skb_load_bytes(skb, 14, &ip, sizeof(ip)))
		return malformed(cfg, EVT_PARSER_ERROR);
	if ((ip.ver_ihl >> 4) != 4) {
		count(&nic_events, EVT_NOT_IPV4, 1);
		priority = cfg->legacy_priority;
		goto out;
	}

	// The classifier: DSCP -> (kind, colour, queue); the loader fills all 64 cells
	// (unassigned DSCPs: legacy, the switch's default action).
	__u32 dscp = ip.tos >> 2;
	struct dscp_class *cls = bpf_map_lookup_elem(&dscp_plan, &dscp);
	if (!cls)
		return TC_ACT_OK;
	kind = cls->kind;
	color = cls->color;
	priority = cls->priority;
	ip_bytes = __builtin_bswap16(ip.total_len);

	// L4 only for option-less, first-fragment IPv4 (the PNA parser's rule). A header cut
	// short past IPv4 is a parser error, a wrong FlexPass header bad FlexPass; passed, both
	// are still classified and policed by their DSCP: a forged or truncated credit cannot
	// bypass the limit.
	__u32 evt = EVT_PARSER_ERROR; // what `bad` is
	int bad = 0, flexpass = 0, emulation = 0;
	struct flow_key flow = {.src = ip.src, .dst = ip.dst};
	if ((ip.ver_ihl & 0xf) == 5 && !(ip.frag_off & __builtin_bswap16(0x1fff))) {
		if (ip.protocol == 17) {
			__be16 udp[4];
			struct fp_hdr fp;
			if (len < 14 + 20 + 8 || bpf_skb_load_bytes(skb, 34, udp, 8)) {
				bad = 1, evt = EVT_PARSER_ERROR;
			} else if (udp[0] != __builtin_bswap16(cfg->udp_port) &&
				   udp[1] != __builtin_bswap16(cfg->udp_port)) {
				// not FlexPass
			} else if (len < 42 + sizeof(fp) || bpf_skb_load_bytes(skb, 42, &fp, sizeof(fp))) {
				bad = 1, evt = EVT_PARSER_ERROR;
			} else {
				count(&nic_events, EVT_FLEXPASS_SEEN, 1);
				__u32 version = fp.ver_type >> 4, type = fp.ver_type & 0xf;
				// A version-1 CREDIT has its 4-byte body (credit_seq) or is truncated.
				if (version == FLEXPASS_VERSION && type == FLEXPASS_TYPE_CREDIT && len < 42 + 8 + 4)
					bad = 1, evt = EVT_PARSER_ERROR;
				else if (version != FLEXPASS_VERSION ||
					 __builtin_bswap16(fp.length) + 8 != __builtin_bswap16(udp[2]))
					bad = 1, evt = EVT_BAD_FLEXPASS;
				flexpass = !bad;
				emulation = flexpass && type == FLEXPASS_TYPE_EMULATION;
				flow.flow_id = fp.flow_id;
			}
		} else if (ip.protocol == 6 && len < 14 + 20 + 20) {
			bad = 1, evt = EVT_PARSER_ERROR;
		}
	}
	if (bad && malformed(cfg, evt) == TC_ACT_SHOT)
		return TC_ACT_SHOT;

	// FlashPass's EMULATION packets share the credit DSCP, but the agent's emulation queue
	// limits them (with its 2-packet selective drop, docs/smartnic.md): a second bucket on
	// another clock would drop what either alone passes. Only a well-formed EMULATION
	// header skips the bucket; anything else in the credit DSCP is policed.
	if (kind == KIND_CREDIT && !emulation) {
		__u64 cost = len > cfg->min_frame_bytes ? len : cfg->min_frame_bytes;
		if (!credit_conforms(cfg, cost)) {
			count(&nic_events, EVT_CREDIT_DROPPED, 1);
			return TC_ACT_SHOT;
		}
		if (flexpass) {
			__u64 one = 1, *n = bpf_map_lookup_elem(&flow_credits, &flow);
			if (n)
				__sync_fetch_and_add(n, 1);
			else if (bpf_map_update_elem(&flow_credits, &flow, &one, BPF_NOEXIST) &&
				 (n = bpf_map_lookup_elem(&flow_credits, &flow)))
				__sync_fetch_and_add(n, 1); // another CPU added it first
		}
	}
out:
	if (priority)
		skb->priority = priority;
	count(&class_packets, CLASS_INDEX(kind, color), 1);
	count(&class_bytes, CLASS_INDEX(kind, color), ip_bytes);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
