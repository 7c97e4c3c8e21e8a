// Runtime TM configuration and telemetry: line-delimited JSON over TCP.
// The protocol is specified in docs/tm-api.md (the only place).
#ifndef FLEXPASS_BMV2_TM_API_H_
#define FLEXPASS_BMV2_TM_API_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "traffic_manager.h"

namespace flexpass {
namespace bmv2 {

// Handles one request line, returns one reply line (no newline).  Never throws.
std::string handle_tm_request(TrafficManager &tm, const std::string &line);

class TmApiServer {
 public:
  explicit TmApiServer(TrafficManager &tm) : tm_(tm) {}
  ~TmApiServer();
  // Binds host:port and starts the accept thread; returns "" or an error.
  std::string start(const std::string &host, uint16_t port);

 private:
  void accept_loop();
  void serve_client(int fd);

  TrafficManager &tm_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<int> clients_{0};
};

}  // namespace bmv2
}  // namespace flexpass

#endif  // FLEXPASS_BMV2_TM_API_H_
