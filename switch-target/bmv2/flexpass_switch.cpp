#include "flexpass_switch.h"

#include <bm/bm_sim/deparser.h>
#include <bm/bm_sim/logger.h>
#include <bm/bm_sim/parser.h>
#include <bm/bm_sim/phv.h>
#include <bm/bm_sim/pipeline.h>
#include <json/json.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "v1model.h"

namespace flexpass {
namespace bmv2 {

namespace {
constexpr uint64_t kQdepthMax = (1u << 19) - 1;  // v1model enq_qdepth/deq_qdepth: bit<19>
// Field names, built once (the PHV looks fields up by std::string).
const std::string k_ipv4_ecn = "ipv4.ecn";
const std::string k_queueing_metadata_qid = "queueing_metadata.qid";
const std::string k_standard_metadata_checksum_error = "standard_metadata.checksum_error";
const std::string k_standard_metadata_deq_qdepth = "standard_metadata.deq_qdepth";
const std::string k_standard_metadata_deq_timedelta = "standard_metadata.deq_timedelta";
const std::string k_standard_metadata_egress_global_timestamp = "standard_metadata.egress_global_timestamp";
const std::string k_standard_metadata_egress_port = "standard_metadata.egress_port";
const std::string k_standard_metadata_egress_spec = "standard_metadata.egress_spec";
const std::string k_standard_metadata_enq_qdepth = "standard_metadata.enq_qdepth";
const std::string k_standard_metadata_enq_timestamp = "standard_metadata.enq_timestamp";
const std::string k_standard_metadata_ingress_global_timestamp = "standard_metadata.ingress_global_timestamp";
const std::string k_standard_metadata_ingress_port = "standard_metadata.ingress_port";
const std::string k_standard_metadata_instance_type = "standard_metadata.instance_type";
const std::string k_standard_metadata_mcast_grp = "standard_metadata.mcast_grp";
const std::string k_standard_metadata_packet_length = "standard_metadata.packet_length";
const std::string k_standard_metadata_parser_error = "standard_metadata.parser_error";
// pFabric (switch-target/README.md "pFabric"): the metadata the P4 program
// writes for the TM, matched like --tm-color-field.
const std::string k_pfabric_rank = "flexpass_meta_t.pfabric_rank";
const std::string k_pfabric_flow = "flexpass_meta_t.pfabric_flow";

void set_if(bm::PHV *phv, const std::string &name, uint64_t v) {
  if (phv->has_field(name)) phv->get_field(name).set(v);
}

tm::Color to_color(uint64_t v) {
  switch (v) {
    case 0: return tm::Color::kGreen;
    case 1: return tm::Color::kYellow;
    default: return tm::Color::kRed;  // 2 (v1model RED); 3 is not a colour, treat as red
  }
}

// True, after logging why, when the pipeline used a v1model feature this
// target does not implement: the caller drops the packet.
bool uses_unsupported(bm::Packet *packet) {
  const uint64_t bad = packet->get_register(kRegUnsupported);
  if (bad == 0) return false;
  bm::Logger::get()->error(
      "flexpass_switch: packet {} uses {}, which this target does not support: dropped",
      packet->get_packet_id(), unsupported_names(bad));
  return true;
}
}  // namespace

FlexPassSwitch::FlexPassSwitch(const SwitchOptions &opts)
    : bm::Switch(opts.enable_swap), opts_(opts), tm_(opts.tm) {
  set_drop_port(opts.drop_port);
  link_v1model_primitives();
  for (const char *f : {"ingress_port", "packet_length", "instance_type", "egress_spec",
                        "egress_port"})
    add_required_field("standard_metadata", f);
  force_arith_header("standard_metadata");
  force_arith_header("queueing_metadata");
  force_arith_header("intrinsic_metadata");
  transmit_ = [this](port_t port, const char *buf, int len) { transmit_fn(port, buf, len); };
}

FlexPassSwitch::~FlexPassSwitch() {
  if (threads_.empty()) return;
  input_.push(nullptr);
  threads_[0].join();  // ingress: no more enqueues
  tm_.stop();
  output_.push(nullptr);
  threads_[1].join();
}

uint64_t FlexPassSwitch::qdepth(uint64_t bytes, uint64_t pkts) const {
  return std::min(opts_.qdepth_units == QdepthUnits::kBytes ? bytes : pkts, kQdepthMax);
}

std::string FlexPassSwitch::resolve_program() {
  program_changed_ = false;
  ProgramInfo info;
  if (field_exists("standard_metadata", "priority"))
    info.priority_field = "standard_metadata.priority";
  else if (field_exists("intrinsic_metadata", "priority"))
    info.priority_field = "intrinsic_metadata.priority";
  info.has_ipv4_ecn = field_exists("ipv4", "ecn");

  std::string error;
  // Metadata fields matching `want` as a suffix of "<metadata header>.<field>"
  // at a '.' boundary: p4c names struct fields "flexpass_meta_t.color" in scalars.
  Json::Value root;
  {
    std::istringstream in(get_config());
    Json::CharReaderBuilder rb;
    std::string perr;
    if (!Json::parseFromStream(rb, in, &root, &perr) && !opts_.color_field.empty())
      error = "cannot parse the loaded P4 JSON: " + perr;
  }
  std::map<std::string, const Json::Value *> types;
  for (const auto &t : root["header_types"]) types[t["name"].asString()] = &t;
  auto find = [&](const std::string &want) {
    std::vector<std::string> found;
    for (const auto &h : root["headers"]) {
      if (!h["metadata"].asBool()) continue;
      auto it = types.find(h["header_type"].asString());
      if (it == types.end()) continue;
      for (const auto &f : (*it->second)["fields"]) {
        const std::string full = h["name"].asString() + "." + f[0].asString();
        if (full == want || (full.size() > want.size() &&
                             full.compare(full.size() - want.size(), want.size(), want) == 0 &&
                             full[full.size() - want.size() - 1] == '.'))
          found.push_back(full);
      }
    }
    return found;
  };
  if (error.empty() && !opts_.color_field.empty()) {
    const std::string &want = opts_.color_field;
    const std::vector<std::string> found = find(want);
    if (found.size() == 1) {
      info.color_field = found[0];
    } else if (found.empty()) {
      error = "the P4 program has no metadata field matching --tm-color-field '" + want +
              "' (use --tm-color-field none to disable colours)";
    } else {
      error = "--tm-color-field '" + want + "' is ambiguous: matches " + found[0] + " and " +
              found[1];
    }
  }
  // pFabric's rank and flow key (optional: without them every packet has rank 0
  // and flow 0, so a pfabric queue is FIFO).
  if (error.empty()) {
    const std::vector<std::string> rank = find(k_pfabric_rank), flow = find(k_pfabric_flow);
    if (rank.size() == 1 && flow.size() == 1) {
      info.rank_field = rank[0];
      info.flow_field = flow[0];
    }
  }
  prog_ = info;
  bm::Logger::get()->info(
      "flexpass_switch: queue from {}, colour from {}, ECT from {}, pFabric rank/flow from {}",
      info.priority_field.empty() ? "(none: queue 0)" : info.priority_field,
      info.color_field.empty() ? "(none: all green)" : info.color_field,
      info.has_ipv4_ecn ? k_ipv4_ecn : "(none)",
      info.rank_field.empty() ? "(none: rank 0)" : info.rank_field + " / " + info.flow_field);
  return error;
}

void FlexPassSwitch::swap_notify_() {
  // Runs inside bm's swap (config lock held): only flag; the ingress thread
  // resolves before it touches the next packet.
  program_changed_ = true;
}

int FlexPassSwitch::receive_(port_t port, const char *buffer, int len) {
  // Room for 512 bytes of added headers, as simple_switch allows.
  auto packet = new_packet_ptr(port, next_packet_id_++, len,
                               bm::PacketBuffer(len + 512, buffer, len));
  bm::PHV *phv = packet->get_phv();
  phv->reset_metadata();
  for (size_t r = 0; r < bm::Packet::nb_registers; ++r) packet->set_register(r, 0);
  packet->set_register(kRegLength, len);
  phv->get_field(k_standard_metadata_ingress_port).set(port);
  phv->get_field(k_standard_metadata_packet_length).set(len);
  phv->get_field(k_standard_metadata_instance_type).set(0);  // NORMAL
  set_if(phv, k_standard_metadata_ingress_global_timestamp, monotonic_ns() / 1000);
  input_.push(std::move(packet));
  return 0;
}

void FlexPassSwitch::start_and_return_() {
  tm_.start([this](Departure &&d) { output_.push_unbounded(std::make_unique<Departure>(std::move(d))); });
  threads_.emplace_back(&FlexPassSwitch::ingress_loop, this);
  threads_.emplace_back(&FlexPassSwitch::egress_loop, this);
}

void FlexPassSwitch::ingress_loop() {
  for (;;) {
    std::unique_ptr<bm::Packet> packet = input_.pop();
    if (!packet) return;
    if (program_changed_) {
      const std::string err = resolve_program();
      if (!err.empty())
        bm::Logger::get()->error("flexpass_switch: new P4 program: {}; colours disabled", err);
    }
    bm::Parser *parser = get_parser("parser");
    bm::Pipeline *ingress = get_pipeline("ingress");
    bm::PHV *phv = packet->get_phv();

    parser->parse(packet.get());  // also verifies checksums
    set_if(phv, k_standard_metadata_parser_error, packet->get_error_code().get());
    set_if(phv, k_standard_metadata_checksum_error, packet->get_checksum_error() ? 1 : 0);
    ingress->apply(packet.get());
    packet->reset_exit();

    if (uses_unsupported(packet.get())) continue;
    if (phv->has_field(k_standard_metadata_mcast_grp) &&
        phv->get_field(k_standard_metadata_mcast_grp).get_uint() != 0) {
      bm::Logger::get()->error(
          "flexpass_switch: packet {} requests multicast group {}, which this target does not "
          "support: dropped",
          packet->get_packet_id(), phv->get_field(k_standard_metadata_mcast_grp).get_uint());
      continue;
    }
    const port_t egress_spec = phv->get_field(k_standard_metadata_egress_spec).get_uint();
    if (egress_spec == opts_.drop_port) {
      BMLOG_DEBUG_PKT(*packet, "Dropping packet at the end of ingress");
      continue;
    }
    admit(std::move(packet), egress_spec);
  }
}

void FlexPassSwitch::admit(std::unique_ptr<bm::Packet> packet, port_t egress_port) {
  bm::PHV *phv = packet->get_phv();
  const uint64_t prio =
      prog_.priority_field.empty() ? 0 : phv->get_field(prog_.priority_field).get_uint64();
  if (prio >= TrafficManager::kQueues || egress_port >= TrafficManager::kMaxPorts) {
    bm::Logger::get()->error(
        "flexpass_switch: packet {}: egress port {} / priority {} out of range (ports 0..{}, "
        "queues 0..{}): dropped",
        packet->get_packet_id(), egress_port, prio, TrafficManager::kMaxPorts - 1,
        TrafficManager::kQueues - 1);
    return;
  }
  tm::PacketMeta meta;
  meta.bytes = static_cast<uint32_t>(packet->get_register(kRegLength));
  meta.queue = static_cast<uint8_t>(prio);
  if (!prog_.color_field.empty())
    meta.color = to_color(phv->get_field(prog_.color_field).get_uint64());
  if (prog_.has_ipv4_ecn && phv->get_header("ipv4").is_valid())
    meta.ect = (phv->get_field(k_ipv4_ecn).get_uint() & 3) != 0;
  if (!prog_.rank_field.empty()) {
    meta.rank = static_cast<uint32_t>(phv->get_field(prog_.rank_field).get_uint64());
    meta.flow = phv->get_field(prog_.flow_field).get_uint64();
  }
  packet->set_egress_port(egress_port);

  const tm::EnqueueResult r =
      tm_.enqueue(egress_port, packet, meta, [&](const tm::EnqueueResult &res, uint64_t now) {
        set_if(phv, k_standard_metadata_enq_timestamp, (now / 1000) & 0xffffffffu);
        set_if(phv, k_standard_metadata_enq_qdepth,
               qdepth(res.depth_bytes_before, res.depth_pkts_before));
      });
  if (!r.admitted) {
    BMLOG_DEBUG_PKT(*packet, "TM drop: port {} queue {} colour {}: {}", egress_port, prio,
                    tm::to_string(meta.color), tm::to_string(r.drop_reason));
  }
}

void FlexPassSwitch::egress_loop() {
  for (;;) {
    std::unique_ptr<Departure> d = output_.pop();
    if (!d) return;
    egress(std::move(*d));
    tm_.egress_done();
  }
}

void FlexPassSwitch::egress(Departure &&d) {
  bm::Packet *packet = d.packet.get();
  bm::PHV *phv = packet->get_phv();
  bm::Pipeline *egress = get_pipeline("egress");
  bm::Deparser *deparser = get_deparser("deparser");

  set_if(phv, k_standard_metadata_egress_global_timestamp, monotonic_ns() / 1000);
  // TM clock: the time the packet waited for the link (sojourn).
  set_if(phv, k_standard_metadata_deq_timedelta,
         ((d.tm.tx_start_ns - d.tm.enqueue_ns) / 1000) & 0xffffffffu);
  set_if(phv, k_standard_metadata_deq_qdepth,
         qdepth(d.tm.depth_bytes_after, d.tm.depth_pkts_after));
  set_if(phv, k_queueing_metadata_qid, d.tm.queue);
  phv->get_field(k_standard_metadata_egress_port).set(d.port);
  phv->get_field(k_standard_metadata_packet_length).set(packet->get_register(kRegLength));

  egress->apply(packet);
  packet->reset_exit();

  if (uses_unsupported(packet)) return;
  if (phv->get_field(k_standard_metadata_egress_spec).get_uint() == opts_.drop_port) {
    BMLOG_DEBUG_PKT(*packet, "Dropping packet at the end of egress");
    return;
  }
  deparser->deparse(packet);  // also updates checksums
  BMLOG_DEBUG_PKT(*packet, "Transmitting packet of size {} out of port {}",
                  packet->get_data_size(), d.port);
  transmit_(d.port, packet->data(), static_cast<int>(packet->get_data_size()));
}

}  // namespace bmv2
}  // namespace flexpass
