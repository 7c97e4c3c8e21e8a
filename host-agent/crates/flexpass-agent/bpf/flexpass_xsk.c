// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// FlexPass AF_XDP steering (docs/datapath.md): IPv4 UDP datagrams whose destination port is
// the agent's FlexPass port go to the AF_XDP socket bound to the receive queue they arrived
// on (XSKMAP indexed by rx_queue_index); everything else — other ports, other protocols,
// IPv6, ARP, IP fragments — is passed to the kernel untouched (XDP_PASS). A queue without a
// socket in the map also passes (the low bits of bpf_redirect_map's flags are the action
// when the lookup fails), so the agent's kernel UDP socket on the same port still gets it.
//
// Built by build.rs with `clang -O2 -g -target bpf`; loaded and attached by the agent with
// aya. Self-contained: only the kernel UAPI headers (linux-libc-dev), no libbpf headers.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

// Kernel helper ABI (include/uapi/linux/bpf.h, enum bpf_func_id): stable numbers.
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)BPF_FUNC_redirect_map;

// The agent's AF_XDP sockets, by receive queue index.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} flexpass_xsks SEC(".maps");

// [0]: the FlexPass UDP port (host byte order), set by the agent before attaching.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} flexpass_port SEC(".maps");

// Only the first buffer of a multi-buffer frame is read (data..data_end): it holds the
// headers, which is all the program looks at.
static __always_inline int steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	// Fragments (MF set or an offset) stay with the kernel, which reassembles them.
	if (ip->frag_off & __builtin_bswap16(0x3fff))
		return XDP_PASS;
	__u32 ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return XDP_PASS;
	struct udphdr *udp = (void *)ip + ihl;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	__u32 zero = 0;
	__u32 *port = bpf_map_lookup_elem(&flexpass_port, &zero);
	if (!port || *port == 0 || udp->dest != __builtin_bswap16((__u16)*port))
		return XDP_PASS;
	return bpf_redirect_map(&flexpass_xsks, ctx->rx_queue_index, XDP_PASS);
}

// For MTUs whose frames fit one UMEM chunk.
SEC("xdp")
int flexpass_xsk(struct xdp_md *ctx)
{
	return steer(ctx);
}

// The same, loaded as multi-buffer aware (BPF_F_XDP_HAS_FRAGS) for jumbo frames: the
// kernel then hands it frames spread over several buffers (veth allows native XDP above
// a page-sized MTU only with such a program), and the AF_XDP socket, bound with
// XDP_USE_SG, receives them as chains of descriptors.
SEC("xdp.frags")
int flexpass_xsk_frags(struct xdp_md *ctx)
{
	return steer(ctx);
}

char _license[] SEC("license") = "Dual BSD/GPL";
