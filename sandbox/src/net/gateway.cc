#include "gateway.h"

#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "dns_message.h"
#include "gateway_state.h"
#include "mutant.h"

namespace smolbox::net {
namespace {

// Queries waiting for the upstream at once; past this, the sandbox gets SERVFAIL at once.
constexpr int kMaxQueriesInFlight = 32;
constexpr size_t kMaxDnsMessage = 4096;
// How long TakeLog waits for open connections to close, in 10 ms steps.
constexpr int kSettleSteps = 50;
// How long the accept loop rests when the process is out of descriptors.
constexpr int kAcceptBackoffMs = 50;

// Runs work on a thread of its own that holds state alive, counted so that the gateway's end
// can wait for it. It dials from the uplink, so it enters the uplink first.
template <typename Work>
void Spawn(const std::shared_ptr<GatewayState>& state, Work work) {
  {
    std::lock_guard lock(state->workers_mutex);
    ++state->workers;
  }
  std::thread([state, work = std::move(work)]() mutable {
    // splice() into a socket whose peer has gone raises SIGPIPE, which would end smolbox: held
    // back in this thread, it leaves splice its EPIPE.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    if (state->uplink.EnterFromThisThread()) work();
    std::lock_guard lock(state->workers_mutex);
    if (--state->workers == 0) state->workers_done.notify_all();
  }).detach();
}

void Refuse(GatewayState& state, UniqueFd client, const ConnectionOrigin& origin,
            std::string reason) {
  if (origin.refused) origin.refused();
  // A reset, not a clean close: the workload's connect gets ECONNRESET, not an empty reply.
  linger hard{1, 0};
  setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  EgressEvent event;
  event.kind = "tcp";
  if (origin.to) {
    event.address = origin.to->address.ToString();
    event.port = origin.to->port;
  }
  event.reason = std::move(reason);
  state.Log(std::move(event));
}

}  // namespace

void GatewayState::Log(EgressEvent event) {
  std::lock_guard lock(log_mutex);
  if (log.size() >= kMaxLogEvents) {
    ++unlogged;
    return;
  }
  log.push_back(std::move(event));
}

Gateway::Gateway(std::shared_ptr<GatewayState> state) : state_(std::move(state)) {}

Expected<std::unique_ptr<Gateway>> Gateway::Start(const EgressSpec& spec, Uplink uplink,
                                                  GatewayListeners listeners) {
  auto state = std::make_shared<GatewayState>();
  state->spec = spec;
  state->uplink = std::move(uplink);
  state->stop.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state->stop.valid()) return std::unexpected(Error::Sys("eventfd for the egress gateway"));
  std::unique_ptr<Gateway> gateway(new Gateway(state));
  gateway->listeners_ = std::move(listeners);
  gateway->loop_ = std::thread([g = gateway.get()] { g->Serve(); });
  return gateway;
}

Gateway::~Gateway() {
  uint64_t one = 1;
  if (write(state_->stop.get(), &one, sizeof one) != sizeof one) {
    // An eventfd write of 1 fails only on overflow, which a single write cannot reach.
  }
  if (loop_.joinable()) loop_.join();
  std::unique_lock lock(state_->workers_mutex);
  state_->workers_done.wait(lock, [&] { return state_->workers == 0; });
}

void Gateway::Serve() {
  pollfd fds[4] = {{state_->stop.get(), POLLIN, 0},
                   {listeners_.tcp4.get(), POLLIN, 0},
                   {listeners_.tcp6.get(), POLLIN, 0},
                   {listeners_.dns.get(), POLLIN, 0}};
  while (poll(fds, 4, -1) >= 0 || errno == EINTR) {
    if (fds[0].revents) return;
    for (int i : {1, 2}) {
      if (!(fds[i].revents & POLLIN)) continue;
      int client = accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (client >= 0) {
        Admit(UniqueFd(client), ConnectionOrigin{i == 2, std::nullopt, nullptr});
      } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays queued; waiting a moment keeps the loop from spinning on it.
        poll(fds, 1, kAcceptBackoffMs);
      }
    }
    if (fds[3].revents & POLLIN) ReceiveQuery();
  }
}

void Gateway::Admit(UniqueFd client, ConnectionOrigin origin) {
  if (state_->connections.load() >= state_->spec.max_connections &&
      SMOLBOX_PROTECTED("connection_cap")) {
    return Refuse(
        *state_, std::move(client), origin,
        fmt::format("the cap of {} open connections is reached", state_->spec.max_connections));
  }
  ++state_->connections;
  Spawn(state_, [s = state_.get(), fd = std::move(client), o = std::move(origin)]() mutable {
    ServeConnection(*s, std::move(fd), o);
    --s->connections;
  });
}

void Gateway::Adopt(UniqueFd stream, const SocketAddress& to, std::function<void()> refused) {
  Admit(std::move(stream), ConnectionOrigin{false, to, std::move(refused)});
}

void Gateway::Answer(std::vector<uint8_t> query,
                     std::function<void(std::vector<uint8_t>)> reply) {
  uint16_t id = 0;
  if (state_->queries.load() >= kMaxQueriesInFlight) {
    if (DnsHeaderId(query, id)) reply(DnsErrorReply(id, nullptr, kRcodeServfail));
    return;
  }
  ++state_->queries;
  Spawn(state_, [s = state_.get(), q = std::move(query), reply = std::move(reply)]() mutable {
    auto answer = AnswerQuery(*s, q);
    --s->queries;
    if (!answer.empty()) reply(std::move(answer));
  });
}

void Gateway::ReceiveQuery() {
  std::vector<uint8_t> query(kMaxDnsMessage);
  sockaddr_storage from{};
  socklen_t from_size = sizeof from;
  ssize_t n = recvfrom(listeners_.dns.get(), query.data(), query.size(), MSG_DONTWAIT,
                       reinterpret_cast<sockaddr*>(&from), &from_size);
  if (n <= 0) return;
  query.resize(static_cast<size_t>(n));
  // The listener outlives every query: the destructor waits for the workers before closing it.
  Answer(std::move(query), [dns = listeners_.dns.get(), from, from_size](std::vector<uint8_t> reply) {
    sendto(dns, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
           reinterpret_cast<const sockaddr*>(&from), from_size);
  });
}

std::vector<EgressEvent> Gateway::TakeLog() {
  // A connection is logged when it closes, which is just after the workload that held it
  // ended: give those a moment, so that they land in this exec's log, not the next one's.
  for (int i = 0;
       i < kSettleSteps && (state_->connections.load() > 0 || state_->queries.load() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::lock_guard lock(state_->log_mutex);
  std::vector<EgressEvent> out = std::move(state_->log);
  state_->log.clear();
  if (state_->unlogged > 0) {
    EgressEvent note;
    note.kind = "note";
    note.reason = fmt::format("{} more events were decided but not logged: the log keeps {}",
                              state_->unlogged, GatewayState::kMaxLogEvents);
    out.push_back(std::move(note));
    state_->unlogged = 0;
  }
  return out;
}

bool Gateway::TakeLimitHit() {
  std::lock_guard lock(state_->log_mutex);
  return std::exchange(state_->limit_hit, false);
}

}  // namespace smolbox::net
