// The v1model action primitives of flexpass_switch: everything p4c-bm2-ss
// emits for a v1model program that bm_sim's core library does not register
// itself (the core registers assign*, push/pop, exit, assert/assume, log_msg).
#include <bm/bm_sim/actions.h>
#include <bm/bm_sim/calculations.h>
#include <bm/bm_sim/counters.h>
#include <bm/bm_sim/logger.h>
#include <bm/bm_sim/meters.h>
#include <bm/bm_sim/packet.h>
#include <bm/bm_sim/phv.h>
#include <bm/bm_sim/stateful.h>

#include <atomic>
#include <random>

#include "v1model.h"

namespace flexpass {
namespace bmv2 {
namespace {
std::atomic<uint32_t> g_drop_port{511};
}  // namespace

// Named (not anonymous) namespace: REGISTER_PRIMITIVE defines a namespace-scope
// bool per primitive, which would be an unused-variable warning otherwise.
namespace primitives {

using bm::ActionPrimitive;
using bm::CounterArray;
using bm::Data;
using bm::Field;
using bm::Header;
using bm::MeterArray;
using bm::NamedCalculation;
using bm::RegisterArray;

// Out-of-range indices are logged and ignored (never UB), in every build type.
bool index_ok(bm::Packet &pkt, const char *what, const std::string &name, size_t idx,
              size_t size) {
  if (idx < size) return true;
  BMLOG_ERROR_PKT(pkt, "{} '{}': index {} out of range (size {}), ignored", what, name, idx,
                  size);
  return false;
}

void set_unsupported(bm::Packet &pkt, Unsupported what) {
  pkt.set_register(kRegUnsupported, pkt.get_register(kRegUnsupported) | what);
}

// mark_to_drop(standard_metadata): egress_spec := drop port, mcast_grp := 0.
class mark_to_drop : public ActionPrimitive<Header &> {
  void operator()(Header &sm) override {
    const auto &type = sm.get_header_type();
    const int spec = type.get_field_offset("egress_spec");
    if (spec < 0) {
      bm::Logger::get()->critical("mark_to_drop: header {} has no egress_spec field", sm.get_name());
      return;
    }
    sm.get_field(spec).set(drop_port());
    const int mcast = type.get_field_offset("mcast_grp");
    if (mcast >= 0) sm.get_field(mcast).set(0);
  }
};
REGISTER_PRIMITIVE(mark_to_drop);

// P4-14 style drop(): same effect on the aliased standard metadata.
class drop : public ActionPrimitive<> {
  void operator()() override {
    get_field("standard_metadata.egress_spec").set(drop_port());
    if (get_phv().has_field("standard_metadata.mcast_grp"))
      get_field("standard_metadata.mcast_grp").set(0);
  }
};
REGISTER_PRIMITIVE(drop);

class modify_field : public ActionPrimitive<Data &, const Data &> {
  void operator()(Data &dst, const Data &src) override { dst.set(src); }
};
REGISTER_PRIMITIVE(modify_field);

class no_op : public ActionPrimitive<> {
  void operator()() override {}
};
REGISTER_PRIMITIVE(no_op);

class count : public ActionPrimitive<CounterArray &, const Data &> {
  void operator()(CounterArray &counters, const Data &index) override {
    const size_t i = index.get_uint64();
    if (!index_ok(get_packet(), "counter", counters.get_name(), i, counters.size())) return;
    counters.get_counter(i).increment_counter(get_packet());
  }
};
REGISTER_PRIMITIVE(count);

// execute_meter(meters, index, dst): dst := colour (0 green, 1 yellow, 2 red).
class execute_meter : public ActionPrimitive<MeterArray &, const Data &, Field &> {
  void operator()(MeterArray &meters, const Data &index, Field &dst) override {
    const size_t i = index.get_uint64();
    if (!index_ok(get_packet(), "meter", meters.get_name(), i, meters.size())) return;
    dst.set(meters.execute_meter(get_packet(), i));
  }
};
REGISTER_PRIMITIVE(execute_meter);

// Registers are shared by the ingress and egress threads: every access takes
// the array's lock.
class register_read : public ActionPrimitive<Field &, const RegisterArray &, const Data &> {
  void operator()(Field &dst, const RegisterArray &regs, const Data &index) override {
    const size_t i = index.get_uint64();
    if (!index_ok(get_packet(), "register", regs.get_name(), i, regs.size())) return;
    auto lock = regs.unique_lock();
    dst.set(regs[i]);
  }
};
REGISTER_PRIMITIVE(register_read);

class register_write : public ActionPrimitive<RegisterArray &, const Data &, const Data &> {
  void operator()(RegisterArray &regs, const Data &index, const Data &value) override {
    const size_t i = index.get_uint64();
    if (!index_ok(get_packet(), "register", regs.get_name(), i, regs.size())) return;
    auto lock = regs.unique_lock();
    regs[i].set(value);
  }
};
REGISTER_PRIMITIVE(register_write);

// hash(dst, algo, base, fields, max): dst := base + calc(fields) mod max.
class modify_field_with_hash_based_offset
    : public ActionPrimitive<Data &, const Data &, const NamedCalculation &, const Data &> {
  void operator()(Data &dst, const Data &base, const NamedCalculation &calc,
                  const Data &max) override {
    uint64_t m = max.get_uint64();
    if (m == 0) m = 1;  // v1model leaves max = 0 unspecified; use base + 0
    dst.set(base.get_uint64() + calc.output(get_packet()) % m);
  }
};
REGISTER_PRIMITIVE(modify_field_with_hash_based_offset);

// random(dst, lo, hi): uniform in [lo, hi]; lo > hi leaves dst unchanged.
class modify_field_rng_uniform : public ActionPrimitive<Data &, const Data &, const Data &> {
  void operator()(Data &dst, const Data &lo, const Data &hi) override {
    const uint64_t a = lo.get_uint64(), b = hi.get_uint64();
    if (a > b) {
      BMLOG_ERROR_PKT(get_packet(), "random: lo {} > hi {}, destination left unchanged", a, b);
      return;
    }
    thread_local std::mt19937_64 rng{std::random_device{}()};
    dst.set(std::uniform_int_distribution<uint64_t>(a, b)(rng));
  }
};
REGISTER_PRIMITIVE(modify_field_rng_uniform);

// setValid / setInvalid: keep the packet-length register in step.
class add_header : public ActionPrimitive<Header &> {
  void operator()(Header &h) override {
    if (h.is_valid()) return;
    h.reset();
    h.mark_valid();
    auto &pkt = get_packet();
    pkt.set_register(kRegLength, pkt.get_register(kRegLength) + h.get_nbytes_packet());
  }
};
REGISTER_PRIMITIVE(add_header);

class remove_header : public ActionPrimitive<Header &> {
  void operator()(Header &h) override {
    if (!h.is_valid()) return;
    auto &pkt = get_packet();
    pkt.set_register(kRegLength, pkt.get_register(kRegLength) - h.get_nbytes_packet());
    h.mark_invalid();
  }
};
REGISTER_PRIMITIVE(remove_header);

class truncate_packet : public ActionPrimitive<const Data &> {
  void operator()(const Data &len) override { get_packet().truncate(len.get_uint64()); }
};
REGISTER_PRIMITIVE_W_NAME("truncate", truncate_packet);

// Unsupported v1model features: flag the packet, the pipeline drops it loudly.
class clone_ingress_pkt_to_egress : public ActionPrimitive<const Data &, const Data &> {
  void operator()(const Data &, const Data &) override { set_unsupported(get_packet(), kClone); }
};
REGISTER_PRIMITIVE(clone_ingress_pkt_to_egress);

class clone_egress_pkt_to_egress : public ActionPrimitive<const Data &, const Data &> {
  void operator()(const Data &, const Data &) override { set_unsupported(get_packet(), kClone); }
};
REGISTER_PRIMITIVE(clone_egress_pkt_to_egress);

class resubmit : public ActionPrimitive<const Data &> {
  void operator()(const Data &) override { set_unsupported(get_packet(), kResubmit); }
};
REGISTER_PRIMITIVE(resubmit);

class recirculate : public ActionPrimitive<const Data &> {
  void operator()(const Data &) override { set_unsupported(get_packet(), kRecirculate); }
};
REGISTER_PRIMITIVE(recirculate);

class generate_digest : public ActionPrimitive<const Data &, const Data &> {
  void operator()(const Data &, const Data &) override { set_unsupported(get_packet(), kDigest); }
};
REGISTER_PRIMITIVE(generate_digest);

}  // namespace primitives

std::string unsupported_names(uint64_t bits) {
  std::string s;
  auto add = [&](uint64_t bit, const char *name) {
    if (!(bits & bit)) return;
    if (!s.empty()) s += ", ";
    s += name;
  };
  add(kClone, "clone");
  add(kResubmit, "resubmit");
  add(kRecirculate, "recirculate");
  add(kDigest, "digest");
  return s;
}

void set_drop_port(uint32_t port) { g_drop_port = port; }
uint32_t drop_port() { return g_drop_port; }
int link_v1model_primitives() { return 0; }

}  // namespace bmv2
}  // namespace flexpass
