// v1model glue shared by the flexpass_switch target and its action primitives.
#ifndef FLEXPASS_BMV2_V1MODEL_H_
#define FLEXPASS_BMV2_V1MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace flexpass {
namespace bmv2 {

// bm::Packet general-purpose registers used by this target (Packet has 4).
enum PacketReg : std::size_t {
  kRegLength = 0,       // standard_metadata.packet_length; add/remove_header keep it current
  kRegUnsupported = 1,  // bit set of Unsupported, set by the primitives below
};

// v1model features this target does not implement.  The primitives only set
// a bit; the pipeline then logs an error and drops the packet.
enum Unsupported : uint64_t {
  kClone = 1u << 0,
  kResubmit = 1u << 1,
  kRecirculate = 1u << 2,
  kDigest = 1u << 3,
};
std::string unsupported_names(uint64_t bits);

// The v1model drop port (egress_spec value meaning "drop"), set once at
// start-up, read by mark_to_drop.
void set_drop_port(uint32_t port);
uint32_t drop_port();

// Called from the switch constructor: keeps primitives.o linked in.
int link_v1model_primitives();

}  // namespace bmv2
}  // namespace flexpass

#endif  // FLEXPASS_BMV2_V1MODEL_H_
