// flexpass_switch: command line, P4Runtime (PI gRPC server), Thrift runtime
// server and TM API server around FlexPassSwitch.  The command line mirrors
// simple_switch_grpc: bm options, then target options after "--".
#include <bm/PI/pi.h>
#include <bm/bm_sim/logger.h>
#include <bm/bm_sim/options_parse.h>
#include <bm/bm_sim/target_parser.h>
#include <bm/bm_sim/transport.h>

#include <PI/frontends/proto/logging.h>
#include <PI/pi.h>
#include <PI/proto/pi_server.h>
#include <PI/target/pi_imp.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "flexpass_switch.h"
#include "tm_api.h"

namespace bm_runtime {
// libbmall: serves the standard bm_runtime Thrift services (tables, counters,
// meters, registers, ...) for simple_switch_CLI.
int start_server(bm::SwitchWContexts *sw, int port);
}  // namespace bm_runtime

namespace {

using flexpass::bmv2::FlexPassSwitch;
using flexpass::bmv2::QdepthUnits;
using flexpass::bmv2::SwitchOptions;
using flexpass::bmv2::TmApiServer;
using RC = bm::TargetParserBasic::ReturnCode;

// Notifications (learning, ageing, swap, port status) go nowhere: digests are
// unsupported and no table uses idle timeouts.  Avoids the nanomsg socket.
class DiscardNotifications : public bm::TransportIface {
  int open_() override { return 0; }
  int send_(const std::string &) const override { return 0; }
  int send_(const char *, int) const override { return 0; }
  int send_msgs_(const std::initializer_list<std::string> &) const override { return 0; }
  int send_msgs_(const std::initializer_list<MsgBuf> &) const override { return 0; }
};

// P4Runtime server messages into the bm log.
class P4RuntimeLog : public pi::fe::proto::LogWriterIface {
  void write(Severity s, const char *msg) override {
    namespace L = spdlog::level;
    const L::level_enum lvl = s == Severity::TRACE   ? L::trace
                              : s == Severity::DEBUG ? L::debug
                              : s == Severity::INFO  ? L::info
                              : s == Severity::WARN  ? L::warn
                              : s == Severity::ERROR ? L::err
                                                     : L::critical;
    bm::Logger::get()->log(lvl, "[P4Runtime] {}", msg);
  }
};

[[noreturn]] void die(const std::string &msg) {
  std::cerr << "flexpass_switch: " << msg << "\n";
  std::exit(1);
}

struct TargetOptions {
  std::string grpc_addr = "0.0.0.0:9559";
  uint32_t cpu_port = 0;
  uint32_t tm_api_port = 9191;
  SwitchOptions sw;
};

class Options {
 public:
  Options() {
    p_.add_string_option("grpc-server-addr", "P4Runtime gRPC server address [0.0.0.0:9559]");
    p_.add_uint_option("cpu-port", "CPU port for P4Runtime packet-in/out (default: none)");
    p_.add_uint_option("drop-port", "v1model drop port [511]");
    p_.add_flag_option("disable-swap", "Disable config swap (P4Runtime needs it)");
    p_.add_uint_option("priority-queues",
                       "Accepted for simple_switch_grpc compatibility; must be <= 8 (the TM "
                       "always has 8 queues per port)");
    p_.add_uint_option("tm-port", "TM API TCP port on 127.0.0.1 [9191]; 0 disables it");
    p_.add_string_option("tm-color-field",
                         "Metadata field holding the packet colour (suffix match) "
                         "[flexpass_meta_t.color]; 'none' = all green");
    p_.add_uint_option("tm-wire-overhead",
                       "Bytes added to BMv2 frame lengths on the emulated wire [24]");
    p_.add_string_option("tm-default-rate-bps", "Default link rate per port [100000000]");
    p_.add_string_option("tm-default-buffer-bytes", "Default buffer per queue [65536]");
    p_.add_string_option("tm-qdepth-units", "enq_qdepth/deq_qdepth units: bytes|packets [bytes]");
    p_.add_uint_option("tm-catchup-us", "Scheduler catch-up window, microseconds [1000]");
    p_.add_uint_option("tm-egress-backlog",
                       "Departures waiting for the egress thread before the TM holds packets "
                       "back in its queues [64]");
  }
  bm::TargetParserBasic *parser() { return &p_; }

  TargetOptions get() const {
    TargetOptions o;
    str("grpc-server-addr", &o.grpc_addr);
    if (p_.get_uint_option("cpu-port", &o.cpu_port) == RC::SUCCESS && o.cpu_port == 0)
      die("--cpu-port 0 is not valid");
    uint("drop-port", &o.sw.drop_port);
    bool no_swap = false;
    if (p_.get_flag_option("disable-swap", &no_swap) != RC::SUCCESS) die("bad --disable-swap");
    o.sw.enable_swap = !no_swap;
    uint32_t prio_queues = 8;
    uint("priority-queues", &prio_queues);
    if (prio_queues == 0 || prio_queues > 8) die("--priority-queues must be 1..8");
    uint("tm-port", &o.tm_api_port);
    if (o.tm_api_port > 65535) die("--tm-port must be 0..65535");

    std::string color = o.sw.color_field;
    str("tm-color-field", &color);
    o.sw.color_field = color == "none" ? "" : color;

    auto &tm = o.sw.tm;
    tm.port.link_rate_bps = 100'000'000;
    tm.port.wire_overhead_bytes = 24;
    tm.queue.buffer_bytes = 65536;
    uint("tm-wire-overhead", &tm.port.wire_overhead_bytes);
    u64("tm-default-rate-bps", &tm.port.link_rate_bps);
    u64("tm-default-buffer-bytes", &tm.queue.buffer_bytes);
    std::string units = "bytes";
    str("tm-qdepth-units", &units);
    if (units == "bytes") o.sw.qdepth_units = QdepthUnits::kBytes;
    else if (units == "packets") o.sw.qdepth_units = QdepthUnits::kPackets;
    else die("--tm-qdepth-units must be 'bytes' or 'packets', not '" + units + "'");
    uint32_t catchup_us = 1000;
    uint("tm-catchup-us", &catchup_us);
    tm.catchup_ns = uint64_t{catchup_us} * 1000;
    uint("tm-egress-backlog", &tm.egress_backlog_pkts);
    if (tm.egress_backlog_pkts == 0) die("--tm-egress-backlog must be at least 1 (packets)");
    std::string err = flexpass::tm::validate(tm.port);
    if (err.empty()) err = flexpass::tm::validate(tm.queue);
    if (!err.empty()) die("invalid TM defaults: " + err);
    return o;
  }

 private:
  void str(const char *name, std::string *v) const {
    const RC rc = p_.get_string_option(name, v);
    if (rc != RC::SUCCESS && rc != RC::OPTION_NOT_PROVIDED) die(std::string("bad --") + name);
  }
  void uint(const char *name, uint32_t *v) const {
    const RC rc = p_.get_uint_option(name, v);
    if (rc != RC::SUCCESS && rc != RC::OPTION_NOT_PROVIDED) die(std::string("bad --") + name);
  }
  void u64(const char *name, uint64_t *v) const {
    std::string s;
    const RC rc = p_.get_string_option(name, &s);
    if (rc == RC::OPTION_NOT_PROVIDED) return;
    char *end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(s.c_str(), &end, 10);
    if (rc != RC::SUCCESS || s.empty() || s[0] == '-' || *end != '\0' || errno != 0)
      die(std::string("--") + name + " must be a non-negative integer, not '" + s + "'");
    *v = x;
  }
  bm::TargetParserBasic p_;
};

}  // namespace

int main(int argc, char *argv[]) {
  Options options;
  bm::OptionsParser parser;
  parser.parse(argc, argv, options.parser());
  const TargetOptions opt = options.get();

  auto sw = std::make_unique<FlexPassSwitch>(opt.sw);
  PIGrpcServerInit();
  if (sw->init_from_options_parser(parser, std::make_shared<DiscardNotifications>(), nullptr) != 0)
    die("switch initialisation failed (see the log)");
  if (!parser.no_p4) {
    const std::string err = sw->resolve_program();
    if (!err.empty()) die(err);
  }
  if (opt.cpu_port > 0 && parser.ifaces.find(opt.cpu_port) != parser.ifaces.end())
    die("--cpu-port " + std::to_string(opt.cpu_port) + " is also a data port (-i)");
  for (const auto &iface : parser.ifaces) {
    if (iface.first >= flexpass::bmv2::TrafficManager::kMaxPorts)
      die("port " + std::to_string(iface.first) + " out of range for the TM (0..511)");
    sw->traffic_manager().ensure_port(iface.first);
  }

  FlexPassSwitch *s = sw.get();
  const uint32_t cpu_port = opt.cpu_port;
  sw->set_transmit_fn([s, cpu_port](FlexPassSwitch::port_t port, const char *buf, int len) {
    if (cpu_port > 0 && port == cpu_port) {
      if (pi_packetin_receive(s->get_device_id(), buf, static_cast<size_t>(len)) !=
          PI_STATUS_SUCCESS)
        bm::Logger::get()->error("P4Runtime packet-in failed");
    } else {
      s->transmit_fn(port, buf, len);
    }
  });

  bm::pi::register_switch(sw.get(), cpu_port);
  pi::fe::proto::LoggerConfig::set_writer(std::make_shared<P4RuntimeLog>());
  PIGrpcServerRunV2(opt.grpc_addr.c_str(), nullptr, nullptr);
  bm_runtime::start_server(sw.get(), sw->get_runtime_port());

  TmApiServer tm_api(sw->traffic_manager());
  if (opt.tm_api_port != 0) {
    const std::string err = tm_api.start("127.0.0.1", static_cast<uint16_t>(opt.tm_api_port));
    if (!err.empty()) die("TM API: " + err);
  }
  bm::Logger::get()->info("flexpass_switch: P4Runtime on {}, Thrift on {}, TM API on 127.0.0.1:{}",
                          opt.grpc_addr, sw->get_runtime_port(), opt.tm_api_port);

  sw->start_and_return();  // waits for a P4 program if started with --no-p4
  PIGrpcServerWait();
  return 0;
}
